// WeightPath.ReportOutcome: the same admission as ReportMeasurement (valid,
// and under mutual TLS only for the certificate's own device id), then the
// durable, idempotent record in the fleet store.
#include "absl/time/clock.h"
#include "server/request_validation.h"
#include "server/rollout_outcome.h"
#include "server/tls.h"
#include "server/weightpath_service.h"
#include "spdlog/spdlog.h"
#include "store/measurement_validation.h"

namespace weightpath::server {

grpc::ServerUnaryReactor* WeightPathService::ReportOutcome(grpc::CallbackServerContext* context,
                                                           const v1::ReportOutcomeRequest* request,
                                                           v1::ReportOutcomeResponse* response) {
  absl::Status status = store::ValidateOutcome(*request);
  if (status.ok() && require_client_identity_) {
    status = CheckDeviceIdentity(*context->auth_context(), request->device_id());
  }
  if (status.ok() && (fleet_ == nullptr || rollouts_ == nullptr)) {
    status = absl::FailedPreconditionError(
        "the server runs with --store=none: outcomes cannot be recorded");
  }
  if (status.ok()) {
    OutcomeContext outcome_context;
    outcome_context.store = &fleet_->store();
    outcome_context.cache = rollouts_;
    outcome_context.metrics = rollout_metrics_;
    outcome_context.received_at = absl::Now();
    absl::StatusOr<v1::ReportOutcomeResponse> recorded =
        HandleReportOutcome(*request, outcome_context);
    if (recorded.ok()) {
      *response = *std::move(recorded);
    } else {
      status = recorded.status();
    }
  }
  if (!status.ok()) {
    const bool device_id_valid = ValidateDeviceId(request->device_id()).ok();
    spdlog::warn("ReportOutcome device_id={} refused: {}: {}",
                 device_id_valid ? request->device_id() : std::string("<invalid>"),
                 absl::StatusCodeToString(status.code()), std::string(status.message()));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace weightpath::server
