#include "agent/report/outcome_report.h"

#include "absl/strings/str_cat.h"
#include "common/control_characters.h"
#include "common/proto_time.h"
#include "common/report_limits.h"

namespace weightpath::agent {
namespace {

// The server refuses a longer detail; an error message that long loses only
// its tail. Escaped first (as every string the agent sends is, see
// EscapeOutgoingStrings), so the escapes count against the limit: a detail
// that is not UTF-8 (an engine's or a mirror's answer quoted in an error)
// would make the whole message unreadable to the server. Cut at a
// character boundary for the same reason.
std::string FittedDetail(const std::string& raw_detail) {
  std::string detail = ControlEscaped(raw_detail);
  if (detail.size() <= kMaxOutcomeDetailBytes) return detail;
  size_t end = kMaxOutcomeDetailBytes;
  while (end > 0 && (static_cast<unsigned char>(detail[end]) & 0xC0) == 0x80) --end;
  return detail.substr(0, end);
}

// What the server's ValidateRunning takes: strings within the report limit
// and without control characters, a digest of 64 lowercase hex digits.
bool SendableRunning(const v1::RunningBuild& running) {
  for (const std::string* text : {&running.path(), &running.model(), &running.decision_etag()}) {
    if (text->size() > kMaxReportStringBytes || HasControlCharacters(*text)) return false;
  }
  if (running.path().empty()) return false;
  const std::string& sha = running.artifact_sha256();
  if (sha.empty()) return true;
  return sha.size() == 64 && sha.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

v1::ReportOutcomeRequest OutcomeReport(const std::string& device_id, v1::Outcome outcome,
                                       const v1::ResolveWeightPathResponse& about,
                                       const std::string& detail, absl::Time observed_at) {
  v1::ReportOutcomeRequest request;
  request.set_device_id(device_id);
  request.set_outcome(outcome);
  request.set_path(about.weight_path().name());
  request.set_artifact_sha256(about.artifact().sha256());
  request.set_policy_version(about.policy_version());
  request.set_rollout_id(about.rollout().rollout_id());
  request.set_detail(FittedDetail(detail));
  *request.mutable_observed_at() = ToProtoTime(observed_at);
  request.set_idempotency_key(OutcomeIdempotencyKey(request));
  return request;
}

v1::BootSource BootSourceOf(DecisionSource source) {
  switch (source) {
    case DecisionSource::kServer:
      return v1::BOOT_SOURCE_SERVER;
    case DecisionSource::kLastGood:
      return v1::BOOT_SOURCE_LAST_GOOD;
    case DecisionSource::kOffline:
      return v1::BOOT_SOURCE_OFFLINE;
  }
  return v1::BOOT_SOURCE_UNSPECIFIED;
}

v1::ReportOutcomeRequest BootReport(const std::string& device_id, v1::Outcome outcome,
                                    const DecisionRecord& booted, const std::string& detail,
                                    absl::Time observed_at) {
  v1::ReportOutcomeRequest request =
      OutcomeReport(device_id, outcome, booted.response, detail, observed_at);
  request.set_boot_source(BootSourceOf(booted.source));
  AddDownloadedBytes(booted, request);
  SetRunning(outcome == v1::OUTCOME_BOOT_FAILED ? nullptr : &booted, request);
  return request;
}

void SetRunning(const DecisionRecord* running, v1::ReportOutcomeRequest& request) {
  v1::RunningBuild* out = request.mutable_running();
  out->Clear();
  if (running == nullptr) {
    out->set_nothing_running(true);
    return;
  }
  out->set_path(running->response.weight_path().name());
  out->set_model(running->response.model());
  out->set_artifact_sha256(running->response.artifact().sha256());
  out->set_decision_etag(running->response.decision_etag());
  out->set_source(BootSourceOf(running->source));
  // The server refuses the whole report for a `running` it cannot compare,
  // and a refused report is not sent again: better a report without it
  // (the device is then not judged) than a lost rollback.
  if (!SendableRunning(*out)) request.clear_running();
}

void AddDownloadedBytes(const DecisionRecord& staged, v1::ReportOutcomeRequest& request) {
  request.set_downloaded_from_mirrors_bytes(staged.downloaded.from_mirrors);
  request.set_downloaded_from_origin_bytes(staged.downloaded.from_origin);
}

std::string OutcomeIdempotencyKey(const v1::ReportOutcomeRequest& request) {
  return absl::StrCat(request.device_id(), "/", request.rollout_id(), "/",
                      v1::Outcome_Name(request.outcome()), "/", request.observed_at().seconds(), ".",
                      request.observed_at().nanos());
}

}  // namespace weightpath::agent
