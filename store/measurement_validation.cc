#include "store/measurement_validation.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/control_characters.h"
#include "common/field_violation.h"
#include "common/proto_time.h"
#include "common/report_limits.h"

namespace weightpath::store {
namespace {

absl::Status Bounded(absl::string_view field, const std::string& value, size_t limit) {
  if (value.size() <= limit) return absl::OkStatus();
  return InvalidArgumentForField(field,
                                 absl::StrCat(field, " is ", value.size(), " bytes; at most ", limit));
}

absl::Status RequireId(absl::string_view field, const std::string& value) {
  if (value.empty()) return InvalidArgumentForField(field, absl::StrCat(field, " is required"));
  return Bounded(field, value, kMaxReportStringBytes);
}

absl::Status RequireFigure(absl::string_view field, double value, double min, bool min_inclusive,
                           double max) {
  if (!std::isfinite(value)) {
    return InvalidArgumentForField(field, absl::StrCat(field, " must be a finite number"));
  }
  const bool above_min = min_inclusive ? value >= min : value > min;
  if (!above_min || value > max) {
    return InvalidArgumentForField(field, absl::StrCat(field, " = ", value, " is outside ",
                                                      min_inclusive ? "[" : "(", min, ", ", max,
                                                      "]"));
  }
  return absl::OkStatus();
}

absl::Status RequireValidTime(absl::string_view field, const google::protobuf::Timestamp& time) {
  if (!IsValidProtoTime(time)) {
    return InvalidArgumentForField(field, absl::StrCat(field, " is not a valid timestamp"));
  }
  return absl::OkStatus();
}

#define WP_CHECK(expr)                         \
  do {                                         \
    absl::Status wp_check_ = (expr);           \
    if (!wp_check_.ok()) return wp_check_;     \
  } while (false)

// The registry compares running.path/model/artifact_sha256 with the
// assignment joined by newlines (BuildKey), and shows them to operators:
// no control characters.
absl::Status PlainReportString(absl::string_view field, const std::string& value) {
  WP_CHECK(Bounded(field, value, kMaxReportStringBytes));
  if (HasControlCharacters(value)) {
    return InvalidArgumentForField(field, absl::StrCat(field, " contains control characters"));
  }
  return absl::OkStatus();
}

bool IsLowercaseSha256(const std::string& value) {
  if (value.size() != 64) return false;
  for (char c : value) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::Status ValidateRunning(const v1::RunningBuild& running) {
  WP_CHECK(PlainReportString("running.path", running.path()));
  WP_CHECK(PlainReportString("running.model", running.model()));
  WP_CHECK(PlainReportString("running.decision_etag", running.decision_etag()));
  if (!running.artifact_sha256().empty() && !IsLowercaseSha256(running.artifact_sha256())) {
    return InvalidArgumentForField(
        "running.artifact_sha256", "running.artifact_sha256 must be empty or 64 lowercase hex digits");
  }
  if (!v1::BootSource_IsValid(running.source())) {
    return InvalidArgumentForField(
        "running.source", absl::StrCat("running.source = ", running.source(),
                                       " is not a BootSource value"));
  }
  if (running.nothing_running()) {
    if (!running.path().empty() || !running.model().empty() ||
        !running.artifact_sha256().empty() || !running.decision_etag().empty()) {
      return InvalidArgumentForField(
          "running.nothing_running",
          "running.nothing_running says nothing runs: path, model, artifact_sha256 and "
          "decision_etag must then be empty");
    }
  } else if (running.path().empty()) {
    return InvalidArgumentForField("running.path",
                                   "running.path is required unless running.nothing_running is set");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateMeasurement(const v1::ReportMeasurementRequest& request) {
  WP_CHECK(RequireId("idempotency_key", request.idempotency_key()));
  WP_CHECK(RequireId("device_id", request.device_id()));
  WP_CHECK(RequireId("path", request.path()));
  WP_CHECK(Bounded("model", request.model(), kMaxReportStringBytes));
  WP_CHECK(Bounded("engine_version", request.engine_version(), kMaxReportStringBytes));
  WP_CHECK(RequireFigure("decode_tok_s", request.decode_tok_s(), 0, false, 1e6));
  WP_CHECK(RequireFigure("prefill_tok_s", request.prefill_tok_s(), 0, true, 1e7));
  WP_CHECK(RequireFigure("gemm_ms_per_step", request.gemm_ms_per_step(), 0, true, 1e6));
  WP_CHECK(RequireFigure("step_ms", request.step_ms(), 0, true, 1e6));
  if (request.threads() == 0 || request.threads() > 4096) {
    return InvalidArgumentForField(
        "threads", absl::StrCat("threads = ", request.threads(), " is outside [1, 4096]"));
  }
  if (request.fidelity_prompts() > 10000) {
    return InvalidArgumentForField(
        "fidelity_prompts", absl::StrCat("fidelity_prompts = ", request.fidelity_prompts(), " is above 10000"));
  }
  if (request.fidelity_exact_matches() > request.fidelity_prompts()) {
    return InvalidArgumentForField("fidelity_exact_matches", absl::StrCat(
        "fidelity_exact_matches = ", request.fidelity_exact_matches(),
        " exceeds fidelity_prompts = ", request.fidelity_prompts()));
  }
  if (request.has_measured_at()) WP_CHECK(RequireValidTime("measured_at", request.measured_at()));
  return absl::OkStatus();
}

absl::Status ValidateOutcome(const v1::ReportOutcomeRequest& request) {
  WP_CHECK(RequireId("idempotency_key", request.idempotency_key()));
  WP_CHECK(RequireId("device_id", request.device_id()));
  if (request.outcome() == v1::OUTCOME_UNSPECIFIED || !v1::Outcome_IsValid(request.outcome())) {
    return InvalidArgumentForField("outcome", "outcome must be one of the Outcome values, not unspecified");
  }
  WP_CHECK(Bounded("path", request.path(), kMaxReportStringBytes));
  WP_CHECK(Bounded("artifact_sha256", request.artifact_sha256(), kMaxReportStringBytes));
  WP_CHECK(Bounded("policy_version", request.policy_version(), kMaxReportStringBytes));
  WP_CHECK(Bounded("rollout_id", request.rollout_id(), kMaxReportStringBytes));
  WP_CHECK(Bounded("detail", request.detail(), kMaxOutcomeDetailBytes));
  // In 64 bits: three uint32 counts summed in 32 wrap (4294967295 + 1 = 0),
  // which let task counts through on an outcome that is not OUTCOME_TASKS.
  const uint64_t tasks = uint64_t{request.tasks_completed()} + request.tasks_undone() +
                         request.tasks_failed();
  const bool has_tasks = tasks > 0;
  if (has_tasks && request.outcome() != v1::OUTCOME_TASKS) {
    return InvalidArgumentForField(
        "tasks_completed", "tasks_completed/tasks_undone/tasks_failed are only allowed with outcome OUTCOME_TASKS");
  }
  if (request.has_observed_at()) WP_CHECK(RequireValidTime("observed_at", request.observed_at()));
  if (request.has_running()) WP_CHECK(ValidateRunning(request.running()));
  return absl::OkStatus();
}

}  // namespace weightpath::store
