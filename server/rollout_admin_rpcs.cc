// FleetAdmin's rollout RPCs and ExplainDecision: admit the operator, then
// hand over to RolloutAdmin / the explainer. Kept apart from
// fleet_admin_service.cc so each RPC group lives in its own file.
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "server/fleet_admin_service.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {

void FleetAdminService::SetRolloutHandlers(RolloutAdmin* rollouts, ExplainFunction explain) {
  rollouts_ = rollouts;
  explain_ = std::move(explain);
}

absl::Status FleetAdminService::AdmitRollouts(const grpc::ServerContextBase& context,
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

grpc::ServerUnaryReactor* FleetAdminService::CreateRollout(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleCreateRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::GetRollout(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleGetRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::ListRollouts(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleListRollouts);
}

grpc::ServerUnaryReactor* FleetAdminService::PauseRollout(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandlePauseRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::ResumeRollout(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleResumeRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::AdvanceRollout(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleAdvanceRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::AbortRollout(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleAbortRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::ExplainDecision(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleExplainDecision);
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleCreateRollout(
    const grpc::ServerContextBase& context, const v1::CreateRolloutRequest& request) {
  RETURN_IF_ERROR(AdmitRollouts(context, "CreateRollout"));
  return rollouts_->Create(request.rollout());
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleGetRollout(
    const grpc::ServerContextBase& context, const v1::GetRolloutRequest& request) {
  RETURN_IF_ERROR(AdmitRollouts(context, "GetRollout"));
  return rollouts_->Get(request.id());
}

absl::StatusOr<v1::ListRolloutsResponse> FleetAdminService::HandleListRollouts(
    const grpc::ServerContextBase& context, const v1::ListRolloutsRequest& /*request*/) {
  RETURN_IF_ERROR(AdmitRollouts(context, "ListRollouts"));
  ASSIGN_OR_RETURN(std::vector<v1::Rollout> listed, rollouts_->List());
  v1::ListRolloutsResponse response;
  for (v1::Rollout& rollout : listed) *response.add_rollouts() = std::move(rollout);
  return response;
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandlePauseRollout(
    const grpc::ServerContextBase& context, const v1::RolloutControlRequest& request) {
  RETURN_IF_ERROR(AdmitRollouts(context, "PauseRollout"));
  return rollouts_->Pause(request.id(), request.reason());
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleResumeRollout(
    const grpc::ServerContextBase& context, const v1::RolloutControlRequest& request) {
  RETURN_IF_ERROR(AdmitRollouts(context, "ResumeRollout"));
  return rollouts_->Resume(request.id(), request.reason());
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleAdvanceRollout(
    const grpc::ServerContextBase& context, const v1::RolloutControlRequest& request) {
  RETURN_IF_ERROR(AdmitRollouts(context, "AdvanceRollout"));
  return rollouts_->Advance(request.id(), request.reason());
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleAbortRollout(
    const grpc::ServerContextBase& context, const v1::RolloutControlRequest& request) {
  RETURN_IF_ERROR(AdmitRollouts(context, "AbortRollout"));
  return rollouts_->Abort(request.id(), request.reason());
}

absl::StatusOr<v1::ExplainDecisionResponse> FleetAdminService::HandleExplainDecision(
    const grpc::ServerContextBase& context, const v1::ExplainDecisionRequest& request) {
  // A full request needs no store, so only the operator check applies here.
  if (absl::Status authorized = auth_->Authorize(context); !authorized.ok()) {
    spdlog::warn("FleetAdmin.ExplainDecision from {} refused: {}", context.peer(),
                 authorized.ToString());
    return authorized;
  }
  if (!explain_) return absl::UnimplementedError("ExplainDecision is not wired");
  return explain_(request);
}

}  // namespace weightpath::server
