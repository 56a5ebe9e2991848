#include "agent/report/pending_reports.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/base/atomic_file.h"
#include "agent/base/local_file.h"
#include "agent/base/log.h"
#include "agent/net/retry_policy.h"
#include "google/protobuf/util/json_util.h"

namespace weightpath::agent {

namespace {

// What kind of fault protobuf's JSON parser found, in words of our own: its
// message quotes the text around the fault (a symlink to /etc/shadow gave
// "Unexpected token.\nroot:$6$..."), and a field name it cannot find is
// the file's text too.
absl::string_view JsonFaultKind(absl::string_view message) {
  if (absl::StrContains(message, "Cannot find field")) return "an unknown field";
  if (absl::StrContains(message, "nvalid value")) return "a value of the wrong type";
  if (absl::StartsWith(message, "Unexpected end")) return "the JSON ends early";
  if (absl::StartsWith(message, "Unexpected token") || absl::StartsWith(message, "Expected")) {
    return "not JSON";
  }
  return "not a ReportOutcomeRequest";
}

}  // namespace

std::string PendingReportsPath(const std::string& state_dir) {
  return (std::filesystem::path(state_dir) / "pending_reports.jsonl").string();
}

std::vector<v1::ReportOutcomeRequest> LoadPendingReports(const std::string& state_dir) {
  const std::string path = PendingReportsPath(state_dir);
  // Only the agent writes this file, always by renaming a regular file over
  // it: a symlink there was planted, and is not followed.
  absl::StatusOr<std::string> text =
      ReadLocalFile(path, "pending reports", kMaxLocalInputBytes, FinalSymlink::kRefuse);
  if (!text.ok()) {
    if (text.status().code() != absl::StatusCode::kNotFound) {
      log::Warn("pending reports {} dropped: {}", path, text.status().ToString());
    }
    return {};
  }
  std::vector<v1::ReportOutcomeRequest> reports;
  int line_number = 0;
  size_t offset = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_number;
    const size_t line_offset = offset;
    offset += line.size() + 1;
    if (line.empty()) continue;
    v1::ReportOutcomeRequest report;
    const google::protobuf::util::Status parsed = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(line.data(), line.size()), &report);
    if (!parsed.ok()) {
      log::Warn("{}: line {} (byte offset {}, {} bytes) is not a report ({}), dropped", path,
                line_number, line_offset, line.size(),
                std::string(JsonFaultKind(parsed.message().as_string())));
      continue;
    }
    reports.push_back(std::move(report));
  }
  if (reports.size() > kMaxPendingReports) {
    const size_t dropped = reports.size() - kMaxPendingReports;
    reports.erase(reports.begin(), reports.begin() + static_cast<std::ptrdiff_t>(dropped));
    log::Warn("{}: {} older report(s) dropped, the newest {} kept", path, dropped,
              kMaxPendingReports);
  }
  return reports;
}

absl::Status SavePendingReports(const std::vector<v1::ReportOutcomeRequest>& reports,
                                const std::string& state_dir) {
  const std::string path = PendingReportsPath(state_dir);
  if (reports.empty()) {
    std::error_code error;
    std::filesystem::remove(path, error);
    if (error) return absl::UnavailableError(absl::StrCat(path, ": ", error.message()));
    return absl::OkStatus();
  }
  const size_t first = reports.size() > kMaxPendingReports ? reports.size() - kMaxPendingReports : 0;
  if (first > 0) {
    log::Warn("{}: {} older report(s) dropped, the newest {} kept", path, first,
              kMaxPendingReports);
  }
  std::string text;
  for (size_t i = first; i < reports.size(); ++i) {
    std::string line;
    const google::protobuf::util::Status printed =
        google::protobuf::util::MessageToJsonString(reports[i], &line);
    if (!printed.ok()) {
      return absl::InternalError(absl::StrCat("pending report: ", printed.message().as_string()));
    }
    absl::StrAppend(&text, line, "\n");
  }
  return WriteFileAtomically(path, text);
}

std::vector<v1::ReportOutcomeRequest> SendReports(std::vector<v1::ReportOutcomeRequest> reports,
                                                  const ReportCall& report,
                                                  absl::Duration call_timeout, Clock& clock,
                                                  MonotonicTime deadline,
                                                  absl::string_view log_prefix) {
  std::vector<v1::ReportOutcomeRequest> still_unsent;
  size_t next = 0;
  absl::string_view why_stopped;
  for (; next < reports.size(); ++next) {
    const absl::Duration left = deadline - clock.MonotonicNow();
    if (left <= absl::ZeroDuration()) {
      why_stopped = "no time left for sending";
      break;
    }
    const absl::Status sent = report(reports[next], std::min(call_timeout, left));
    if (sent.ok()) continue;
    log::Warn("{}: report {} not accepted: {}", std::string(log_prefix),
              v1::Outcome_Name(reports[next].outcome()), sent.ToString());
    if (!IsRetryable(sent.code())) continue;
    still_unsent.push_back(std::move(reports[next]));
    ++next;
    why_stopped = "the server is not taking reports now";
    break;
  }
  if (next < reports.size()) {
    log::Info("{}: {} more report(s) not sent now: {}", std::string(log_prefix),
              reports.size() - next, std::string(why_stopped));
    const auto rest = reports.begin() + static_cast<std::ptrdiff_t>(next);
    still_unsent.insert(still_unsent.end(), std::make_move_iterator(rest),
                        std::make_move_iterator(reports.end()));
  }
  return still_unsent;
}

}  // namespace weightpath::agent
