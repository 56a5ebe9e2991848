#include "agent/net/retry_policy.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "agent/net/weightpath_client.h"
#include "common/retry_pushback.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::FakeClock;
using weightpath::testing::IsOk;
using weightpath::testing::StatusIs;

// Always draws the top of the range, so the waits are the ceilings exactly.
class TopOfRange : public RandomSource {
 public:
  double Uniform(double, double high) override { return high; }
};

RetryOptions Options(absl::Duration call_timeout, absl::Duration base, absl::Duration cap) {
  return RetryOptions{call_timeout, base, cap};
}

TEST(AgentRetryPolicy, CeilingDoublesFromTheBaseUpToTheCap) {
  const RetryOptions options = Options(absl::Seconds(1), absl::Milliseconds(100), absl::Seconds(1));
  EXPECT_EQ(BackoffCeiling(options, 0), absl::Milliseconds(100));
  EXPECT_EQ(BackoffCeiling(options, 1), absl::Milliseconds(200));
  EXPECT_EQ(BackoffCeiling(options, 2), absl::Milliseconds(400));
  EXPECT_EQ(BackoffCeiling(options, 3), absl::Milliseconds(800));
  EXPECT_EQ(BackoffCeiling(options, 4), absl::Seconds(1));
  EXPECT_EQ(BackoffCeiling(options, 500), absl::Seconds(1));
}

TEST(AgentRetryPolicy, WaitsAtTheTopOfTheJitterRangeAreTheCeilings) {
  FakeClock clock;
  TopOfRange random;
  int calls = 0;
  const absl::Status status = CallWithRetries(
      Options(absl::Seconds(1), absl::Milliseconds(100), absl::Milliseconds(500)),
      clock.MonotonicNow() + absl::Minutes(1), clock, random,
      [&](absl::Duration) {
        return ++calls < 6 ? absl::UnavailableError("connection refused") : absl::OkStatus();
      });
  EXPECT_THAT(status, IsOk());
  EXPECT_EQ(calls, 6);
  EXPECT_THAT(clock.sleeps(),
              ElementsAre(absl::Milliseconds(100), absl::Milliseconds(200),
                          absl::Milliseconds(400), absl::Milliseconds(500),
                          absl::Milliseconds(500)));
}

TEST(AgentRetryPolicy, SeededJitterStaysWithinFullJitterBoundsAndRepeats) {
  const RetryOptions options = Options(absl::Seconds(1), absl::Milliseconds(50), absl::Seconds(2));
  auto run = [&](uint64_t seed) {
    FakeClock clock;
    SeededRandomSource random(seed);
    int calls = 0;
    RetryTrace trace;
    EXPECT_THAT(CallWithRetries(options, clock.MonotonicNow() + absl::Hours(1), clock, random,
                                [&](absl::Duration) {
                                  return ++calls < 12 ? absl::UnavailableError("down")
                                                      : absl::OkStatus();
                                },
                                &trace),
                IsOk());
    EXPECT_EQ(trace.attempts, 12);
    return clock.sleeps();
  };
  const std::vector<absl::Duration> waits = run(7);
  ASSERT_EQ(waits.size(), 11u);
  for (size_t attempt = 0; attempt < waits.size(); ++attempt) {
    EXPECT_GE(waits[attempt], absl::ZeroDuration()) << "attempt " << attempt;
    EXPECT_LE(waits[attempt], BackoffCeiling(options, static_cast<int>(attempt)))
        << "attempt " << attempt;
  }
  EXPECT_EQ(run(7), waits);
  EXPECT_NE(run(8), waits);
}

TEST(AgentRetryPolicy, RetriesEachRetryableCode) {
  for (absl::StatusCode code : {absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded,
                                absl::StatusCode::kResourceExhausted}) {
    FakeClock clock;
    TopOfRange random;
    int calls = 0;
    EXPECT_THAT(CallWithRetries(Options(absl::Seconds(1), absl::Milliseconds(10), absl::Seconds(1)),
                                clock.MonotonicNow() + absl::Minutes(1), clock, random,
                                [&](absl::Duration) {
                                  return ++calls < 3 ? absl::Status(code, "transient")
                                                     : absl::OkStatus();
                                }),
                IsOk())
        << absl::StatusCodeToString(code);
    EXPECT_EQ(calls, 3) << absl::StatusCodeToString(code);
  }
}

TEST(AgentRetryPolicy, NonRetryableCodeReturnsAtOnceWithoutWaiting) {
  for (absl::StatusCode code :
       {absl::StatusCode::kInvalidArgument, absl::StatusCode::kNotFound,
        absl::StatusCode::kPermissionDenied, absl::StatusCode::kUnauthenticated,
        absl::StatusCode::kFailedPrecondition, absl::StatusCode::kInternal}) {
    FakeClock clock;
    TopOfRange random;
    int calls = 0;
    EXPECT_THAT(CallWithRetries(Options(absl::Seconds(1), absl::Milliseconds(10), absl::Seconds(1)),
                                clock.MonotonicNow() + absl::Minutes(1), clock, random,
                                [&](absl::Duration) {
                                  ++calls;
                                  return absl::Status(code, "model \"x\" is not in the catalog");
                                }),
                StatusIs(code, HasSubstr("catalog")));
    EXPECT_EQ(calls, 1) << absl::StatusCodeToString(code);
    EXPECT_TRUE(clock.sleeps().empty()) << absl::StatusCodeToString(code);
  }
}

TEST(AgentRetryPolicy, BudgetStopsRetriesAndEveryCallDeadlineStaysInsideIt) {
  FakeClock clock;
  TopOfRange random;
  const MonotonicTime start = clock.MonotonicNow();
  const MonotonicTime budget_end = start + absl::Seconds(10);
  std::vector<MonotonicTime> call_starts;
  std::vector<absl::Duration> timeouts;
  RetryTrace trace;
  const absl::Status status = CallWithRetries(
      Options(absl::Seconds(2), absl::Milliseconds(500), absl::Seconds(4)), budget_end, clock,
      random,
      [&](absl::Duration timeout) {
        call_starts.push_back(clock.MonotonicNow());
        timeouts.push_back(timeout);
        clock.Advance(timeout);  // a server that never answers
        return absl::DeadlineExceededError("deadline exceeded");
      },
      &trace);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded,
                               HasSubstr("budget exhausted after 4 attempt(s)")));
  // Calls take their full 2 s, waits are 0.5, 1 and 2 s; the fourth call
  // gets only the 0.5 s left, and the 4 s wait after it would overrun.
  EXPECT_THAT(call_starts,
              ElementsAre(start, start + absl::Milliseconds(2500),
                          start + absl::Milliseconds(5500), start + absl::Milliseconds(9500)));
  EXPECT_THAT(timeouts, ElementsAre(absl::Seconds(2), absl::Seconds(2), absl::Seconds(2),
                                    absl::Milliseconds(500)));
  EXPECT_THAT(trace.waits, ElementsAre(absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(2)));
  EXPECT_EQ(clock.MonotonicNow(), budget_end);
}

TEST(AgentRetryPolicy, CallTimeoutIsClippedToWhatIsLeftOfTheBudget) {
  FakeClock clock;
  TopOfRange random;
  const MonotonicTime budget_end = clock.MonotonicNow() + absl::Seconds(3);
  absl::Duration first_timeout = absl::ZeroDuration();
  (void)CallWithRetries(Options(absl::Seconds(5), absl::Milliseconds(100), absl::Seconds(1)),
                        budget_end, clock, random, [&](absl::Duration timeout) {
                          if (first_timeout == absl::ZeroDuration()) first_timeout = timeout;
                          clock.Advance(timeout);
                          return absl::DeadlineExceededError("no answer");
                        });
  EXPECT_EQ(first_timeout, absl::Seconds(3));
}

// NTP stepping the date of a board without a real-time clock, forwards and
// back by a year, between and during calls: the schedule is that of a clock
// that never moved.
TEST(AgentRetryPolicy, WallClockStepsChangeNothing) {
  auto run = [](bool step_the_wall_clock) {
    FakeClock clock;
    TopOfRange random;
    std::vector<absl::Duration> timeouts;
    int calls = 0;
    RetryTrace trace;
    const absl::Status status = CallWithRetries(
        Options(absl::Seconds(2), absl::Milliseconds(500), absl::Seconds(4)),
        clock.MonotonicNow() + absl::Seconds(10), clock, random,
        [&](absl::Duration timeout) {
          timeouts.push_back(timeout);
          if (step_the_wall_clock) {
            clock.StepWallClock(++calls % 2 == 1 ? absl::Hours(24 * 365) : -absl::Hours(24 * 365));
          }
          clock.Advance(timeout / 2);
          return absl::UnavailableError("connection refused");
        },
        &trace);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded));
    return std::make_pair(timeouts, trace.waits);
  };
  const auto steady = run(false);
  const auto stepped = run(true);
  EXPECT_EQ(stepped.first, steady.first);
  EXPECT_EQ(stepped.second, steady.second);
  EXPECT_GE(steady.first.size(), 3u);
}

TEST(AgentRetryPolicy, SpentBudgetMakesNoCall) {
  FakeClock clock;
  TopOfRange random;
  int calls = 0;
  EXPECT_THAT(CallWithRetries(Options(absl::Seconds(1), absl::Milliseconds(100), absl::Seconds(1)),
                              clock.MonotonicNow(), clock, random,
                              [&](absl::Duration) {
                                ++calls;
                                return absl::OkStatus();
                              }),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("0 attempt(s)")));
  EXPECT_EQ(calls, 0);
}

// gRPC gets the call's timeout as a monotonic deadline: the context reports
// it (in wall time) as now + timeout, and a wall-clock step after this point
// could not move it.
TEST(AgentRetryPolicy, CallTimeoutBecomesADeadlineThatEndsThatFarFromNow) {
  grpc::ClientContext context;
  const absl::Time before = absl::Now();
  SetCallTimeout(context, absl::Seconds(7));
  const absl::Time deadline = absl::FromChrono(context.deadline());
  EXPECT_GE(deadline, before + absl::Seconds(7) - absl::Milliseconds(50));
  EXPECT_LE(deadline, absl::Now() + absl::Seconds(7) + absl::Milliseconds(50));
}

// A server shedding load says when to come back (grpc-retry-pushback-ms):
// that wait replaces the jittered backoff, whatever the attempt.
TEST(AgentRetryPolicy, TheServersPushbackReplacesTheBackoff) {
  FakeClock clock;
  TopOfRange random;  // the backoff would be 100, 200, 400 ms
  int calls = 0;
  RetryTrace trace;
  const absl::Status status = CallWithRetries(
      Options(absl::Seconds(1), absl::Milliseconds(100), absl::Seconds(8)),
      clock.MonotonicNow() + absl::Minutes(1), clock, random,
      [&](absl::Duration) {
        ++calls;
        if (calls == 1) {
          return WithRetryPushback(absl::ResourceExhaustedError("slow down"), absl::Seconds(3));
        }
        if (calls == 2) return absl::UnavailableError("restarting");  // no pushback: backoff
        if (calls == 3) {
          return WithRetryPushback(absl::ResourceExhaustedError("busy"), absl::Milliseconds(1));
        }
        return absl::OkStatus();
      },
      &trace);
  EXPECT_THAT(status, IsOk());
  EXPECT_EQ(calls, 4);
  EXPECT_THAT(clock.sleeps(), ElementsAre(absl::Seconds(3), absl::Milliseconds(200),
                                          absl::Milliseconds(1)));
  EXPECT_EQ(trace.pushbacks, 2);
}

TEST(AgentRetryPolicy, APushbackPastTheBudgetEndsTheRetriesAtOnce) {
  FakeClock clock;
  TopOfRange random;
  int calls = 0;
  const MonotonicTime start = clock.MonotonicNow();
  EXPECT_THAT(CallWithRetries(Options(absl::Seconds(1), absl::Milliseconds(100), absl::Seconds(1)),
                              start + absl::Seconds(10), clock, random,
                              [&](absl::Duration) {
                                ++calls;
                                return WithRetryPushback(absl::ResourceExhaustedError("later"),
                                                         absl::Minutes(5));
                              }),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("budget exhausted after 1 attempt(s)")));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(clock.sleeps().empty()) << "the budget is left for the fallback";
  EXPECT_EQ(clock.MonotonicNow(), start);
}

TEST(AgentRetryPolicy, APushbackSayingDoNotRetryIsHonoured) {
  FakeClock clock;
  TopOfRange random;
  int calls = 0;
  EXPECT_THAT(CallWithRetries(Options(absl::Seconds(1), absl::Milliseconds(100), absl::Seconds(1)),
                              clock.MonotonicNow() + absl::Minutes(1), clock, random,
                              [&](absl::Duration) {
                                ++calls;
                                return WithRetryPushback(absl::ResourceExhaustedError("go away"),
                                                         ParseRetryPushback("-1"));
                              }),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("go away")));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(clock.sleeps().empty());
}

}  // namespace
}  // namespace weightpath::agent
