// FleetAdmin's rollout RPCs and ExplainDecision: admit the operator, then
// hand over to RolloutAdmin / the explainer. Kept apart from
// fleet_admin_service.cc so each RPC group lives in its own file.
#include "server/fleet_admin_service.h"
#include "server/weightpath_service.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

grpc::Status AnswerRollout(absl::StatusOr<v1::Rollout> result, v1::Rollout* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

void FleetAdminService::SetRolloutHandlers(RolloutAdmin* rollouts, ExplainFunction explain) {
  rollouts_ = rollouts;
  explain_ = std::move(explain);
}

absl::Status FleetAdminService::AdmitRollouts(const grpc::ServerContext& context,
                                              const char* method) const {
  absl::Status status = auth_->Authorize(context);
  if (!status.ok()) {
    spdlog::warn("FleetAdmin.{} from {} refused: {}", method, context.peer(), status.ToString());
    return status;
  }
  if (rollouts_ == nullptr) {
    return absl::FailedPreconditionError(
        "the server runs with --store=none: rollouts need a fleet store shared by the replicas");
  }
  return absl::OkStatus();
}

grpc::Status FleetAdminService::CreateRollout(grpc::ServerContext* context,
                                              const v1::CreateRolloutRequest* request,
                                              v1::Rollout* response) {
  if (absl::Status admitted = AdmitRollouts(*context, "CreateRollout"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return AnswerRollout(rollouts_->Create(request->rollout()), response);
}

grpc::Status FleetAdminService::GetRollout(grpc::ServerContext* context,
                                           const v1::GetRolloutRequest* request,
                                           v1::Rollout* response) {
  if (absl::Status admitted = AdmitRollouts(*context, "GetRollout"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return AnswerRollout(rollouts_->Get(request->id()), response);
}

grpc::Status FleetAdminService::ListRollouts(grpc::ServerContext* context,
                                             const v1::ListRolloutsRequest* /*request*/,
                                             v1::ListRolloutsResponse* response) {
  if (absl::Status admitted = AdmitRollouts(*context, "ListRollouts"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  absl::StatusOr<std::vector<v1::Rollout>> listed = rollouts_->List();
  if (!listed.ok()) return ToGrpcStatus(listed.status());
  for (v1::Rollout& rollout : *listed) *response->add_rollouts() = std::move(rollout);
  return grpc::Status::OK;
}

grpc::Status FleetAdminService::PauseRollout(grpc::ServerContext* context,
                                             const v1::RolloutControlRequest* request,
                                             v1::Rollout* response) {
  if (absl::Status admitted = AdmitRollouts(*context, "PauseRollout"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return AnswerRollout(rollouts_->Pause(request->id(), request->reason()), response);
}

grpc::Status FleetAdminService::ResumeRollout(grpc::ServerContext* context,
                                              const v1::RolloutControlRequest* request,
                                              v1::Rollout* response) {
  if (absl::Status admitted = AdmitRollouts(*context, "ResumeRollout"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return AnswerRollout(rollouts_->Resume(request->id(), request->reason()), response);
}

grpc::Status FleetAdminService::AdvanceRollout(grpc::ServerContext* context,
                                               const v1::RolloutControlRequest* request,
                                               v1::Rollout* response) {
  if (absl::Status admitted = AdmitRollouts(*context, "AdvanceRollout"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return AnswerRollout(rollouts_->Advance(request->id(), request->reason()), response);
}

grpc::Status FleetAdminService::AbortRollout(grpc::ServerContext* context,
                                             const v1::RolloutControlRequest* request,
                                             v1::Rollout* response) {
  if (absl::Status admitted = AdmitRollouts(*context, "AbortRollout"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return AnswerRollout(rollouts_->Abort(request->id(), request->reason()), response);
}

grpc::Status FleetAdminService::ExplainDecision(grpc::ServerContext* context,
                                                const v1::ExplainDecisionRequest* request,
                                                v1::ExplainDecisionResponse* response) {
  // A full request needs no store, so only the operator check applies here.
  if (absl::Status authorized = auth_->Authorize(*context); !authorized.ok()) {
    spdlog::warn("FleetAdmin.ExplainDecision from {} refused: {}", context->peer(),
                 authorized.ToString());
    return ToGrpcStatus(authorized);
  }
  if (!explain_) return ToGrpcStatus(absl::UnimplementedError("ExplainDecision is not wired"));
  absl::StatusOr<v1::ExplainDecisionResponse> explained = explain_(*request);
  if (!explained.ok()) return ToGrpcStatus(explained.status());
  *response = *std::move(explained);
  return grpc::Status::OK;
}

}  // namespace weightpath::server
