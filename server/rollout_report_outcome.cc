// WeightPath.ReportOutcome: the same admission as ReportMeasurement (valid,
// and under mutual TLS only for the certificate's own device id), then the
// durable, idempotent record in the fleet store.
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/rollout_outcome.h"
#include "server/weightpath_service.h"
#include "store/measurement_validation.h"

namespace weightpath::server {

grpc::ServerUnaryReactor* WeightPathService::ReportOutcome(grpc::CallbackServerContext* context,
                                                           const v1::ReportOutcomeRequest* request,
                                                           v1::ReportOutcomeResponse* response) {
  auto record = [&]() -> absl::StatusOr<v1::ReportOutcomeResponse> {
    RETURN_IF_ERROR(AdmitDevice(*context, store::ValidateOutcome(*request), request->device_id()));
    if (fleet_ == nullptr || rollouts_ == nullptr) {
      return absl::FailedPreconditionError(
          "the server runs with --store=none: outcomes cannot be recorded");
    }
    OutcomeContext outcome_context;
    outcome_context.store = &fleet_->store();
    outcome_context.cache = rollouts_;
    outcome_context.metrics = rollout_metrics_;
    outcome_context.received_at = absl::Now();
    return HandleReportOutcome(*request, outcome_context);
  };
  return FinishDeviceCall(context, "ReportOutcome", request->device_id(), record(), response);
}

}  // namespace weightpath::server
