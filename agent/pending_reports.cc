#include "agent/pending_reports.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/atomic_file.h"
#include "agent/local_file.h"
#include "agent/log.h"
#include "agent/retry_policy.h"
#include "common/retry_pushback.h"
#include "google/protobuf/util/json_util.h"

namespace weightpath::agent {

std::string PendingReportsPath(const std::string& state_dir) {
  return (std::filesystem::path(state_dir) / "pending_reports.jsonl").string();
}

std::vector<v1::ReportOutcomeRequest> LoadPendingReports(const std::string& state_dir) {
  const std::string path = PendingReportsPath(state_dir);
  absl::StatusOr<std::string> text = ReadLocalFile(path, "pending reports");
  if (!text.ok()) {
    if (text.status().code() != absl::StatusCode::kNotFound) {
      log::Warn("pending reports {} dropped: {}", path, text.status().ToString());
    }
    return {};
  }
  std::vector<v1::ReportOutcomeRequest> reports;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    ++line_number;
    v1::ReportOutcomeRequest report;
    const google::protobuf::util::Status parsed = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(line.data(), line.size()), &report);
    if (!parsed.ok()) {
      log::Warn("{}:{}: not a report, dropped: {}", path, line_number,
                   parsed.message().as_string());
      continue;
    }
    reports.push_back(std::move(report));
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
                                                  absl::Duration timeout,
                                                  absl::string_view log_prefix) {
  std::vector<v1::ReportOutcomeRequest> still_unsent;
  for (size_t i = 0; i < reports.size(); ++i) {
    const absl::Status sent = report(reports[i], timeout);
    if (sent.ok()) continue;
    if (IsRetryable(sent.code())) still_unsent.push_back(reports[i]);
    log::Warn("{}: report {} not accepted: {}", std::string(log_prefix),
                 v1::Outcome_Name(reports[i].outcome()), sent.ToString());
    if (RetryPushback(sent).has_value()) {
      still_unsent.insert(still_unsent.end(),
                          std::make_move_iterator(reports.begin() + static_cast<std::ptrdiff_t>(i) + 1),
                          std::make_move_iterator(reports.end()));
      break;
    }
  }
  return still_unsent;
}

}  // namespace weightpath::agent
