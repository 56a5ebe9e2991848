// Outcome reports the server has not accepted yet, kept in state_dir: a
// boot that fell back to the last good or the offline decision has just
// failed to reach the server, yet that is the boot operators most need to
// hear of. The next boot, or the `run` loop, sends them once the server
// answers; each keeps its idempotency key, so one sent twice counts once.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// A device offline for long keeps only its latest boots: the oldest report
// makes way past this many, when the file is written and when it is read
// (a file written by hand, or by an older agent, may hold more).
inline constexpr size_t kMaxPendingReports = 32;

std::string PendingReportsPath(const std::string& state_dir);

// What is waiting, oldest first: at most the newest kMaxPendingReports, the
// number of older ones dropped logged. A missing file is none; an unreadable
// one (also a symlink, a FIFO, a file over 1 MiB) or a line that is not a
// report is skipped with a warning (a report is worth less than the boot
// that would stop over it). A warning names the line and byte offset and
// the kind of fault, never the line's text: whoever can plant a symlink or
// a file there must not get another file's contents into the journal.
std::vector<v1::ReportOutcomeRequest> LoadPendingReports(const std::string& state_dir);

// Replaces the file atomically with the last kMaxPendingReports of
// `reports` (one protobuf JSON object a line); none removes it.
absl::Status SavePendingReports(const std::vector<v1::ReportOutcomeRequest>& reports,
                                const std::string& state_dir);

// One ReportOutcome call, which may take `timeout` from when it starts.
using ReportCall =
    std::function<absl::Status(const v1::ReportOutcomeRequest& request, absl::Duration timeout)>;

// Sends `reports` in order, each within `call_timeout` clipped to what is
// left until `deadline` (monotonic), and returns those worth sending again:
// a transport failure or a server shedding load (a refusal would be refused
// again, so it is dropped). The first such failure ends the sending: a
// server that did not take one report in time (unreachable, or its store
// slow) would cost every later one its whole timeout too, and boot sends
// these while the engine waits. So does `deadline`: what is not sent by
// then is returned unsent, in order. Failures are logged as "`log_prefix`:
// report OUTCOME not accepted".
std::vector<v1::ReportOutcomeRequest> SendReports(std::vector<v1::ReportOutcomeRequest> reports,
                                                  const ReportCall& report,
                                                  absl::Duration call_timeout, Clock& clock,
                                                  MonotonicTime deadline,
                                                  absl::string_view log_prefix);

}  // namespace weightpath::agent
