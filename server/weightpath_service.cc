#include "server/weightpath_service.h"

#include <chrono>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "server/request_validation.h"
#include "server/resolve_wire.h"
#include "server/response_cache.h"
#include "server/resolver.h"
#include "server/tls.h"
#include "spdlog/spdlog.h"
#include "store/measurement_validation.h"

namespace weightpath::server {
namespace {

const std::vector<v1::Rollout> kNoRollouts;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

WeightPathService::WeightPathService(const SnapshotHolder* snapshots, ServerMetrics* metrics,
                                     bool require_client_identity, FleetState* fleet)
    : snapshots_(snapshots),
      metrics_(metrics),
      require_client_identity_(require_client_identity),
      fleet_(fleet) {}

grpc::ServerUnaryReactor* WeightPathService::ResolveWeightPath(grpc::CallbackServerContext* context,
                                                               const grpc::ByteBuffer* request_bytes,
                                                               grpc::ByteBuffer* response_bytes) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!request_bytes->Valid()) {
    // The call ended before its message arrived (the client reset the
    // stream). A typed handler is never called for one; answer as gRPC
    // does there and leave the resolve counters and the log alone.
    reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL, "No payload"));
    return reactor;
  }
  const auto started = std::chrono::steady_clock::now();
  ResolveScratch& scratch = ThreadResolveScratch();
  ResolveSummary summary;
  // The copy shares the received slices; it only exists because parsing
  // reads through a non-const buffer.
  grpc::ByteBuffer received(*request_bytes);
  absl::Status status = ParseResolveRequest(&received, &scratch);
  if (status.ok()) {
    status = AnswerResolve(context, scratch.request, &scratch.per_call, &summary, response_bytes);
  }
  if (!status.ok()) {
    // device_id is only echoed once it passed validation, so a hostile value
    // never reaches the log verbatim.
    const bool device_id_valid = ValidateDeviceId(scratch.request.device_id()).ok();
    spdlog::warn("ResolveWeightPath device_id={} refused: {}: {}",
                 device_id_valid ? scratch.request.device_id() : std::string("<invalid>"),
                 absl::StatusCodeToString(status.code()), std::string(status.message()));
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
  metrics_->RecordResolve(summary, static_cast<int>(status.code()), elapsed.count());
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Status WeightPathService::AnswerResolve(grpc::CallbackServerContext* context,
                                              const v1::ResolveWeightPathRequest& request,
                                              v1::ResolveWeightPathResponse* per_call,
                                              ResolveSummary* summary,
                                              grpc::ByteBuffer* response_bytes) {
  RETURN_IF_ERROR(ValidateResolveRequest(request));
  if (require_client_identity_) {
    RETURN_IF_ERROR(CheckDeviceIdentity(*context->auth_context(), request.device_id()));
  }
  // Both stay valid for the whole call; a refresh or reload publishes new ones.
  const RolloutCache::Rollouts& rollouts = rollouts_ != nullptr ? rollouts_->ForThisCall() : kNoRollouts;
  const Snapshot& snapshot = snapshots_->Current();
  ASSIGN_OR_RETURN(const ResolvedDecision decision, Decide(request, snapshot, summary, rollouts));
  const DecidedPart& decided = ThreadDecidedPartCache().Find(*snapshots_, snapshot, decision);
  per_call->Clear();
  FillPerCallPart(decision, per_call);
  if (fleet_ != nullptr) {
    fleet_->ApplyVerification(decided.message.weight_path().name(), decided.message.hardware_class(),
                              request.profile().cpu_model(), per_call->mutable_weight_path());
    fleet_->RecordResolve(request, decided.message, *per_call);
  }
  EncodeResolveResponse(decided.encoded, *per_call, response_bytes);

  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("ResolveWeightPath device_id={} class={} path={} model={} policy={}",
                  request.device_id(), decided.message.hardware_class(),
                  decided.message.weight_path().name(), decided.message.model(),
                  decided.message.policy_version());
  }
  return absl::OkStatus();
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
