#include "server/weightpath_service.h"

#include <chrono>
#include <string>

#include "server/request_validation.h"
#include "server/resolver.h"
#include "server/tls.h"
#include "spdlog/spdlog.h"
#include "store/measurement_validation.h"

namespace weightpath::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

WeightPathService::WeightPathService(const SnapshotHolder* snapshots, ServerMetrics* metrics,
                                     bool require_client_identity, FleetState* fleet)
    : snapshots_(snapshots),
      metrics_(metrics),
      require_client_identity_(require_client_identity),
      fleet_(fleet) {
  SetMessageAllocatorFor_ResolveWeightPath(&resolve_allocator_);
}

grpc::ServerUnaryReactor* WeightPathService::ResolveWeightPath(
    grpc::CallbackServerContext* context, const v1::ResolveWeightPathRequest* request,
    v1::ResolveWeightPathResponse* response) {
  const auto started = std::chrono::steady_clock::now();
  ResolveSummary summary;
  absl::Status status = ValidateResolveRequest(*request);
  if (status.ok() && require_client_identity_) {
    status = CheckDeviceIdentity(*context->auth_context(), request->device_id());
  }
  if (status.ok()) {
    // The cache's set is held for the whole call; a refresh swaps in a new one.
    const std::shared_ptr<const RolloutCache::Rollouts> rollouts =
        rollouts_ != nullptr ? rollouts_->Current() : std::make_shared<const RolloutCache::Rollouts>();
    status = Resolve(*request, snapshots_->Current(), response, &summary, *rollouts);
  }
  if (status.ok() && fleet_ != nullptr) {
    fleet_->ApplyVerification(*request, response);
    fleet_->RecordResolve(*request, *response);
  }

  if (!status.ok()) {
    // device_id is only echoed once it passed validation, so a hostile value
    // never reaches the log verbatim.
    const bool device_id_valid = ValidateDeviceId(request->device_id()).ok();
    spdlog::warn("ResolveWeightPath device_id={} refused: {}: {}",
                 device_id_valid ? request->device_id() : std::string("<invalid>"),
                 absl::StatusCodeToString(status.code()), std::string(status.message()));
  } else if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("ResolveWeightPath device_id={} class={} path={} model={} policy={}",
                  request->device_id(), response->hardware_class(),
                  response->weight_path().name(), response->model(), response->policy_version());
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
  metrics_->RecordResolve(summary, static_cast<int>(status.code()), elapsed.count());

  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* WeightPathService::ReportMeasurement(
    grpc::CallbackServerContext* context, const v1::ReportMeasurementRequest* request,
    v1::ReportMeasurementResponse* response) {
  absl::Status status = store::ValidateMeasurement(*request);
  if (status.ok() && require_client_identity_) {
    status = CheckDeviceIdentity(*context->auth_context(), request->device_id());
  }
  if (status.ok() && fleet_ == nullptr) {
    status = absl::FailedPreconditionError(
        "the server runs with --store=none: measurements cannot be recorded");
  }
  if (status.ok()) {
    absl::StatusOr<v1::ReportMeasurementResponse> recorded = fleet_->ReportMeasurement(*request);
    if (recorded.ok()) {
      *response = *std::move(recorded);
    } else {
      status = recorded.status();
    }
  }
  if (!status.ok()) {
    const bool device_id_valid = ValidateDeviceId(request->device_id()).ok();
    spdlog::warn("ReportMeasurement device_id={} refused: {}: {}",
                 device_id_valid ? request->device_id() : std::string("<invalid>"),
                 absl::StatusCodeToString(status.code()), std::string(status.message()));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace weightpath::server
