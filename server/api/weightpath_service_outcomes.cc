// WeightPath.ReportOutcome: the same admission as ReportMeasurement (valid,
// and under mutual TLS only for the certificate's own device id), then the
// durable, idempotent record in the fleet store.
#include <chrono>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/resolve/request_validation.h"
#include "server/rollout/rollout_outcome.h"
#include "server/api/store_call.h"
#include "server/api/weightpath_service.h"

namespace weightpath::server {

grpc::ServerUnaryReactor* WeightPathService::ReportOutcome(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request_bytes,
                                                           grpc::ByteBuffer* response_bytes) {
  return ServeStoreCall<v1::ReportOutcomeRequest>(
      context, request_bytes, response_bytes, store_executor_,
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
  if (!fleet_.has_value()) {
    return absl::FailedPreconditionError(
        "the server runs with --store=none: outcomes cannot be recorded");
  }
  OutcomeContext outcome_context;
  outcome_context.store = &fleet_->state.store();
  outcome_context.cache = &fleet_->rollouts;
  outcome_context.metrics = &fleet_->rollout_metrics;
  outcome_context.received_at = absl::Now();
  return HandleReportOutcome(request, outcome_context);
}

}  // namespace weightpath::server
