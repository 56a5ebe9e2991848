// FleetAdmin's rollout RPCs and ExplainDecision: admit the operator, then
// hand over to RolloutAdmin / the explainer. Kept apart from
// fleet_admin_service.cc so each RPC group lives in its own file.
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "server/api/fleet_admin_service.h"

namespace weightpath::server {

grpc::ServerUnaryReactor* FleetAdminService::CreateRollout(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/CreateRollout", context, request, response,
               &FleetAdminService::HandleCreateRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::GetRollout(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/GetRollout", context, request, response,
               &FleetAdminService::HandleGetRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::ListRollouts(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/ListRollouts", context, request, response,
               &FleetAdminService::HandleListRollouts);
}

grpc::ServerUnaryReactor* FleetAdminService::PauseRollout(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/PauseRollout", context, request, response,
               &FleetAdminService::HandlePauseRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::ResumeRollout(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/ResumeRollout", context, request, response,
               &FleetAdminService::HandleResumeRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::AdvanceRollout(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/AdvanceRollout", context, request, response,
               &FleetAdminService::HandleAdvanceRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::AbortRollout(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/AbortRollout", context, request, response,
               &FleetAdminService::HandleAbortRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::UpdateRollout(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/UpdateRollout", context, request, response,
               &FleetAdminService::HandleUpdateRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::DeleteRollout(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/DeleteRollout", context, request, response,
               &FleetAdminService::HandleDeleteRollout);
}

grpc::ServerUnaryReactor* FleetAdminService::ListRolloutDevices(grpc::CallbackServerContext* context,
                                                                const grpc::ByteBuffer* request,
                                                                grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/ListRolloutDevices", context, request, response,
               &FleetAdminService::HandleListRolloutDevices);
}

grpc::ServerUnaryReactor* FleetAdminService::ExplainDecision(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/ExplainDecision", context, request, response,
               &FleetAdminService::HandleExplainDecision);
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleCreateRollout(
    const grpc::ServerContextBase& context, const v1::CreateRolloutRequest& request) {
  RETURN_IF_ERROR(Admit(context, "CreateRollout", Needs::kRollouts));
  return fleet_->rollouts.Create(request.rollout());
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleGetRollout(
    const grpc::ServerContextBase& context, const v1::GetRolloutRequest& request) {
  RETURN_IF_ERROR(Admit(context, "GetRollout", Needs::kRollouts));
  return fleet_->rollouts.Get(request.id());
}

absl::StatusOr<v1::ListRolloutsResponse> FleetAdminService::HandleListRollouts(
    const grpc::ServerContextBase& context, const v1::ListRolloutsRequest& /*request*/) {
  RETURN_IF_ERROR(Admit(context, "ListRollouts", Needs::kRollouts));
  ASSIGN_OR_RETURN(std::vector<v1::Rollout> listed, fleet_->rollouts.List());
  v1::ListRolloutsResponse response;
  for (v1::Rollout& rollout : listed) *response.add_rollouts() = std::move(rollout);
  return response;
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandlePauseRollout(
    const grpc::ServerContextBase& context, const v1::RolloutControlRequest& request) {
  RETURN_IF_ERROR(Admit(context, "PauseRollout", Needs::kRollouts));
  return fleet_->rollouts.Pause(request.id(), request.reason());
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleResumeRollout(
    const grpc::ServerContextBase& context, const v1::RolloutControlRequest& request) {
  RETURN_IF_ERROR(Admit(context, "ResumeRollout", Needs::kRollouts));
  return fleet_->rollouts.Resume(request.id(), request.reason());
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleAdvanceRollout(
    const grpc::ServerContextBase& context, const v1::RolloutControlRequest& request) {
  RETURN_IF_ERROR(Admit(context, "AdvanceRollout", Needs::kRollouts));
  return fleet_->rollouts.Advance(request.id(), request.reason());
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleAbortRollout(
    const grpc::ServerContextBase& context, const v1::RolloutControlRequest& request) {
  RETURN_IF_ERROR(Admit(context, "AbortRollout", Needs::kRollouts));
  return fleet_->rollouts.Abort(request.id(), request.reason());
}

absl::StatusOr<v1::Rollout> FleetAdminService::HandleUpdateRollout(
    const grpc::ServerContextBase& context, const v1::UpdateRolloutRequest& request) {
  RETURN_IF_ERROR(Admit(context, "UpdateRollout", Needs::kRollouts));
  return fleet_->rollouts.Update(request.rollout());
}

absl::StatusOr<v1::DeleteRolloutResponse> FleetAdminService::HandleDeleteRollout(
    const grpc::ServerContextBase& context, const v1::DeleteRolloutRequest& request) {
  RETURN_IF_ERROR(Admit(context, "DeleteRollout", Needs::kRollouts));
  RETURN_IF_ERROR(fleet_->rollouts.Delete(request.id()).status());
  return v1::DeleteRolloutResponse();
}

absl::StatusOr<v1::ListRolloutDevicesResponse> FleetAdminService::HandleListRolloutDevices(
    const grpc::ServerContextBase& context, const v1::ListRolloutDevicesRequest& request) {
  RETURN_IF_ERROR(Admit(context, "ListRolloutDevices", Needs::kRollouts));
  return fleet_->rollouts.ListDevices(request);
}

absl::StatusOr<v1::ExplainDecisionResponse> FleetAdminService::HandleExplainDecision(
    const grpc::ServerContextBase& context, const v1::ExplainDecisionRequest& request) {
  // A full request needs no store, so only the operator check applies here.
  RETURN_IF_ERROR(Admit(context, "ExplainDecision", Needs::kOperatorOnly));
  if (!explain_) return absl::UnimplementedError("ExplainDecision is not wired");
  return explain_(request);
}

}  // namespace weightpath::server
