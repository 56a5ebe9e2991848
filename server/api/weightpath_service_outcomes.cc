// WeightPath.ReportOutcome: the same admission as ReportMeasurement (valid,
// and under mutual TLS only for the certificate's own device id), then the
// durable, idempotent record in the fleet store.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/field_violation.h"
#include "common/report_limits.h"
#include "common/status_macros.h"
#include "policy/hardware_class.h"
#include "server/resolve/request_validation.h"
#include "server/rollout/rollout_outcome.h"
#include "server/api/store_call.h"
#include "server/api/weightpath_service.h"

namespace weightpath::server {
namespace {

// boot_source becomes a metric label and says where a boot's decision came
// from, so only a known value on a boot report is taken.
absl::Status ValidateBootSource(const v1::ReportOutcomeRequest& request) {
  if (!v1::BootSource_IsValid(request.boot_source())) {
    return InvalidArgumentForField(
        "boot_source", absl::StrCat("boot_source: ", request.boot_source(),
                                    " is not a BootSource value (BOOT_SOURCE_SERVER, "
                                    "BOOT_SOURCE_LAST_GOOD or BOOT_SOURCE_OFFLINE)"));
  }
  const bool boot_report =
      request.outcome() == v1::OUTCOME_BOOT_OK || request.outcome() == v1::OUTCOME_BOOT_FAILED;
  if (request.boot_source() != v1::BOOT_SOURCE_UNSPECIFIED && !boot_report) {
    return InvalidArgumentForField(
        "boot_source", absl::StrCat("boot_source is only for OUTCOME_BOOT_OK and "
                                    "OUTCOME_BOOT_FAILED, not ",
                                    v1::Outcome_Name(request.outcome())));
  }
  return absl::OkStatus();
}

// The download counters add these up for the whole fleet, so each is bounded.
absl::Status ValidateDownloadedBytes(const v1::ReportOutcomeRequest& request) {
  for (const auto& [field, bytes] :
       {std::pair<const char*, uint64_t>{"downloaded_from_mirrors_bytes",
                                         request.downloaded_from_mirrors_bytes()},
        std::pair<const char*, uint64_t>{"downloaded_from_origin_bytes",
                                         request.downloaded_from_origin_bytes()}}) {
    if (bytes > kMaxReportedDownloadBytes) {
      return InvalidArgumentForField(
          field, absl::StrCat(field, ": ", bytes, " bytes is more than the ",
                              kMaxReportedDownloadBytes, " a report may carry"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* WeightPathService::ReportOutcome(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request_bytes,
                                                           grpc::ByteBuffer* response_bytes) {
  return ServeStoreCall<v1::ReportOutcomeRequest>(
      CountedAs{metrics_, "WeightPath/ReportOutcome"}, context, request_bytes, response_bytes, store_executor_,
      [this, context](const v1::ReportOutcomeRequest& request) {
        return LoggedIfRefused("ReportOutcome", request.device_id(), RecordOutcome(*context, request));
      },
      [this](const v1::ReportOutcomeRequest& request) {
        return AdmitLoad(DeviceCallMethod::kReportOutcome, request.device_id(),
                         SteadyNanos(std::chrono::steady_clock::now()));
      });
}

absl::StatusOr<v1::ReportOutcomeResponse> WeightPathService::RecordOutcome(
    const grpc::CallbackServerContext& context, const v1::ReportOutcomeRequest& request) {
  RETURN_IF_ERROR(AdmitDevice(context, ValidateReport(request), request.device_id()));
  RETURN_IF_ERROR(ValidateBootSource(request));
  RETURN_IF_ERROR(ValidateDownloadedBytes(request));
  if (!fleet_.has_value()) {
    return absl::FailedPreconditionError(
        "the server runs with --store=none: outcomes cannot be recorded");
  }
  OutcomeContext outcome_context;
  outcome_context.store = &fleet_->state.store();
  outcome_context.cache = &fleet_->rollouts;
  outcome_context.metrics = &fleet_->rollout_metrics;
  outcome_context.received_at = absl::Now();
  ASSIGN_OR_RETURN(v1::ReportOutcomeResponse response,
                   HandleReportOutcome(request, outcome_context));
  // The store keeps no boot_source (the outcome record has no column for
  // it): the counters are where boots by source are seen.
  if (!response.duplicate() && metrics_ != nullptr) {
    metrics_->RecordOutcome(request.outcome(), request.boot_source(),
                            !request.rollout_id().empty());
    metrics_->RecordDeviceDownload(request.downloaded_from_mirrors_bytes(),
                                   request.downloaded_from_origin_bytes());
    // The report names no class; the device's record does. One read, for
    // a report that is rare (a device whose disk the build does not fit).
    if (request.outcome() == v1::OUTCOME_CACHE_FULL) {
      absl::StatusOr<v1::Device> device = fleet_->state.store().GetDevice(request.device_id());
      if (device.ok()) {
        absl::StatusOr<policy::HardwareClass> hardware_class =
            policy::ParseHardwareClass(device->hardware_class());
        if (hardware_class.ok()) metrics_->RecordCacheFull(*hardware_class);
      }
    }
  }
  return response;
}

}  // namespace weightpath::server
