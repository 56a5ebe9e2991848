#include "agent/net/retry_policy.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/retry_pushback.h"

namespace weightpath::agent {
namespace {

// Past 2^40 any sane base delay has long exceeded any sane cap; stopping
// the doubling there keeps the arithmetic away from overflow.
constexpr int kMaxDoublings = 40;

absl::Status BudgetExhausted(int attempts, const absl::Status& last_error) {
  return absl::DeadlineExceededError(absl::StrCat("budget exhausted after ", attempts,
                                                  " attempt(s); last error: ",
                                                  last_error.ToString()));
}

}  // namespace

bool IsRetryable(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded ||
         code == absl::StatusCode::kResourceExhausted;
}

absl::Duration BackoffCeiling(const RetryOptions& options, int attempt) {
  const int doublings = std::clamp(attempt, 0, kMaxDoublings);
  return std::min(options.max_delay, options.base_delay * (int64_t{1} << doublings));
}

absl::Status CallWithRetries(const RetryOptions& options, MonotonicTime budget_end, Clock& clock,
                             RandomSource& random,
                             const std::function<absl::Status(absl::Duration call_timeout)>& call,
                             RetryTrace* trace) {
  RetryTrace local_trace;
  RetryTrace& record = trace != nullptr ? *trace : local_trace;
  absl::Status last_error = absl::DeadlineExceededError("the budget was spent before any call");
  for (int attempt = 0;; ++attempt) {
    const MonotonicTime now = clock.MonotonicNow();
    if (now >= budget_end) return BudgetExhausted(record.attempts, last_error);
    const absl::Duration call_timeout = std::min(options.call_timeout, budget_end - now);
    ++record.attempts;
    last_error = call(call_timeout);
    if (last_error.ok() || !IsRetryable(last_error.code())) return last_error;

    absl::Duration wait;
    if (const std::optional<absl::Duration> pushback = RetryPushback(last_error)) {
      // The server said when to come back (it is shedding load): its word
      // replaces our backoff. It spreads the waits it hands out itself, and
      // coming back earlier would only be refused again.
      if (*pushback == absl::InfiniteDuration()) return last_error;  // "do not retry"
      wait = *pushback;
      ++record.pushbacks;
    } else {
      const double ceiling_seconds = absl::ToDoubleSeconds(BackoffCeiling(options, attempt));
      wait = absl::Seconds(random.Uniform(0.0, ceiling_seconds));
    }
    // A wait that ends past the budget could only be followed by a call with
    // no time left to answer, so give up now and leave the time to fallback.
    if (clock.MonotonicNow() + wait >= budget_end) return BudgetExhausted(record.attempts, last_error);
    record.waits.push_back(wait);
    clock.SleepFor(wait);
  }
}

}  // namespace weightpath::agent
