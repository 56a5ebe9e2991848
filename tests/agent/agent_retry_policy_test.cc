#include "agent/retry_policy.h"

#include <vector>

#include "absl/status/status.h"
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
      clock.Now() + absl::Minutes(1), clock, random,
      [&](absl::Time) {
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
    EXPECT_THAT(CallWithRetries(options, clock.Now() + absl::Hours(1), clock, random,
                                [&](absl::Time) {
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
                                clock.Now() + absl::Minutes(1), clock, random,
                                [&](absl::Time) {
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
                                clock.Now() + absl::Minutes(1), clock, random,
                                [&](absl::Time) {
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
  const absl::Time start = clock.Now();
  const absl::Time budget_end = start + absl::Seconds(10);
  std::vector<absl::Time> call_starts;
  std::vector<absl::Time> deadlines;
  RetryTrace trace;
  const absl::Status status = CallWithRetries(
      Options(absl::Seconds(2), absl::Milliseconds(500), absl::Seconds(4)), budget_end, clock,
      random,
      [&](absl::Time deadline) {
        call_starts.push_back(clock.Now());
        deadlines.push_back(deadline);
        clock.Advance(deadline - clock.Now());  // a server that never answers
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
  EXPECT_THAT(deadlines,
              ElementsAre(start + absl::Seconds(2), start + absl::Milliseconds(4500),
                          start + absl::Milliseconds(7500), budget_end));
  EXPECT_THAT(trace.waits, ElementsAre(absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(2)));
  EXPECT_EQ(clock.Now(), budget_end);
}

TEST(AgentRetryPolicy, CallDeadlineIsClippedToWhatIsLeftOfTheBudget) {
  FakeClock clock;
  TopOfRange random;
  const absl::Time budget_end = clock.Now() + absl::Seconds(3);
  absl::Time first_deadline;
  (void)CallWithRetries(Options(absl::Seconds(5), absl::Milliseconds(100), absl::Seconds(1)),
                        budget_end, clock, random, [&](absl::Time deadline) {
                          if (first_deadline == absl::Time()) first_deadline = deadline;
                          clock.Advance(deadline - clock.Now());
                          return absl::DeadlineExceededError("no answer");
                        });
  EXPECT_EQ(first_deadline, budget_end);
}

TEST(AgentRetryPolicy, SpentBudgetMakesNoCall) {
  FakeClock clock;
  TopOfRange random;
  int calls = 0;
  EXPECT_THAT(CallWithRetries(Options(absl::Seconds(1), absl::Milliseconds(100), absl::Seconds(1)),
                              clock.Now(), clock, random,
                              [&](absl::Time) {
                                ++calls;
                                return absl::OkStatus();
                              }),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("0 attempt(s)")));
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace weightpath::agent
