// Retries of a remote call: exponential backoff with full jitter, a deadline
// on every call, and one budget over the whole phase.
//
// Full jitter (each wait drawn from [0, ceiling]) rather than a fixed
// schedule matters for a fleet: devices that lose power together reboot
// together, and identical schedules would hit a recovering server in waves.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "agent/base/random_source.h"

namespace weightpath::agent {

struct RetryOptions {
  absl::Duration call_timeout = absl::Seconds(5);
  absl::Duration base_delay = absl::Milliseconds(250);
  absl::Duration max_delay = absl::Seconds(8);
};

// Only failures a later attempt can cure: the server is unreachable or
// restarting, a call ran out of time, or the server shed load. Anything else
// (a rejected request, a missing catalog entry) would fail the same way again.
bool IsRetryable(absl::StatusCode code);

// The upper bound of the wait after failed attempt `attempt` (0-based):
// min(max_delay, base_delay * 2^attempt).
absl::Duration BackoffCeiling(const RetryOptions& options, int attempt);

// What happened, for the log line and for tests.
struct RetryTrace {
  int attempts = 0;
  std::vector<absl::Duration> waits;
  int pushbacks = 0;  // waits the server chose (grpc-retry-pushback-ms)
};

// Calls `call` with a timeout of min(call_timeout, what is left until
// `budget_end`) until it succeeds, fails with a non-retryable code (returned
// as is), or the next wait would end past `budget_end` (DEADLINE_EXCEEDED
// naming the attempts and the last error). A failure carrying the server's
// retry pushback (common/retry_pushback.h: the grpc-retry-pushback-ms
// trailer, which the agent's clients read) waits exactly that long instead
// of the backoff, and one saying "do not retry" is returned as is. All of it
// is measured on the clock's monotonic reading. The call gets a timeout rather than a point in
// time so that it can turn it into whatever deadline its transport needs at
// the moment it starts (see SetCallTimeout in weightpath_client.h).
absl::Status CallWithRetries(const RetryOptions& options, MonotonicTime budget_end, Clock& clock,
                             RandomSource& random,
                             const std::function<absl::Status(absl::Duration call_timeout)>& call,
                             RetryTrace* trace = nullptr);

}  // namespace weightpath::agent
