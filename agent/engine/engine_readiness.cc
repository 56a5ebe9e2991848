#include "agent/engine/engine_readiness.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/net/plain_http.h"

namespace weightpath::agent {
namespace {

// A health answer is a few bytes; anything larger is not read.
constexpr int64_t kMaxHealthBodyBytes = 64 * 1024;
// One attempt never waits longer than this for the engine to answer.
constexpr absl::Duration kMaxAttempt = absl::Seconds(5);

}  // namespace

absl::Status WaitForEngineReady(const ReadinessWait& wait, Clock* clock) {
  absl::StatusOr<PlainHttpUrl> url = ParsePlainHttpUrl(wait.url);
  if (!url.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--wait-ready ", wait.url, ": ", url.status().message()));
  }
  const MonotonicTime start = clock->MonotonicNow();
  const MonotonicTime deadline = start + wait.timeout;
  std::string last = "no answer yet";
  while (true) {
    const MonotonicTime now = clock->MonotonicNow();
    if (now >= deadline) break;
    // A fresh connection each time: an engine restarting between polls
    // must not leave us on a dead socket.
    PlainHttpConnection connection(clock);
    absl::StatusOr<PlainHttpResponse> answer =
        connection.Get(*url, kMaxHealthBodyBytes, std::min(deadline, now + kMaxAttempt));
    if (answer.ok() && answer->status == 200) return absl::OkStatus();
    last = answer.ok() ? absl::StrCat("HTTP ", answer->status)
                       : std::string(answer.status().message());
    const absl::Duration left = deadline - clock->MonotonicNow();
    if (left <= absl::ZeroDuration()) break;
    clock->SleepFor(std::min(wait.poll_interval, left));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("engine not ready at ", wait.url, " after ",
                   absl::FormatDuration(absl::Trunc(clock->MonotonicNow() - start, absl::Seconds(1))),
                   ": last answer ", last));
}

}  // namespace weightpath::agent
