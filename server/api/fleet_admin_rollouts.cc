// FleetAdmin's rollout RPCs and ExplainDecision: admit the operator, then
// hand over to RolloutAdmin / the explainer. Kept apart from
// fleet_admin_service.cc so each RPC group lives in its own file.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/api/fleet_admin_service.h"
#include "server/api/policy_plan.h"

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
  v1::DeleteRolloutResponse response;
  // Only a COMPLETED rollout both can be deleted and still shapes
  // decisions; the others move nobody when deleted (an aborted one's
  // members moved back when it stopped shaping), or are refused below.
  absl::StatusOr<v1::Rollout> stored = fleet_->rollouts.Get(request.id());
  // NOT_FOUND is Delete's to answer, naming the id; any other error means
  // the check could not be made, and nothing is deleted unchecked.
  if (!stored.ok() && stored.status().code() != absl::StatusCode::kNotFound) {
    return stored.status();
  }
  if (stored.ok() && stored->state() == v1::ROLLOUT_STATE_COMPLETED) {
    ASSIGN_OR_RETURN(const std::vector<v1::Rollout> rollouts, fleet_->rollouts.List());
    v1::PlanRolloutRequest plan;
    plan.mutable_rollout()->set_id(request.id());
    plan.set_deletion(true);
    FleetState& fleet = fleet_->queries.state();
    const std::shared_ptr<const Snapshot> snapshot = fleet.CurrentSnapshot();
    absl::StatusOr<v1::PlanRolloutResponse> plan_result = server::PlanRollout(
        plan, *snapshot->policy, rollouts, fleet.store(), SystemClockInstance()->Now());
    // With force the count is only told, so a pass that could not finish
    // does not stop the deletion; without it, nothing is deleted unchecked.
    if (!plan_result.ok() && !request.force()) return plan_result.status();
    v1::PlanRolloutResponse planned =
        plan_result.ok() ? *std::move(plan_result) : v1::PlanRolloutResponse();
    const uint64_t moved = DevicesMoved(planned.on_delete());
    // Refused here, not in weightpathctl, so that every client is held to it.
    if (moved > 0 && !request.force()) {
      const v1::PlanPolicyResponse::Move& first = planned.on_delete().moves(0);
      return absl::FailedPreconditionError(absl::StrCat(
          "deleting rollout '", request.id(), "' would move ", moved,
          moved == 1 ? " registered device" : " registered devices",
          " back to the policy's decision (", first.devices(), " ", first.hardware_class(),
          " from ", first.from_path(), " to ",
          first.to_path().empty() ? "a refusal" : first.to_path(),
          first.example_device_ids().empty() ? std::string()
                                             : absl::StrCat(", e.g. ", first.example_device_ids(0)),
          planned.on_delete().moves_size() > 1 ? ", and more" : "",
          "); set force (--force) to delete it anyway, or make its action permanent in the "
          "policy first (weightpathctl rollout promote)"));
    }
    *response.mutable_moved_back() = std::move(*planned.mutable_on_delete());
  }
  RETURN_IF_ERROR(
      fleet_->rollouts
          .Delete(request.id(), stored.ok() ? std::optional<v1::RolloutState>(stored->state())
                                            : std::nullopt)
          .status());
  return response;
}

grpc::ServerUnaryReactor* FleetAdminService::PlanRollout(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/PlanRollout", context, request, response,
               &FleetAdminService::HandlePlanRollout);
}

absl::StatusOr<v1::PlanRolloutResponse> FleetAdminService::HandlePlanRollout(
    const grpc::ServerContextBase& context, const v1::PlanRolloutRequest& request) {
  RETURN_IF_ERROR(Admit(context, "PlanRollout", Needs::kRollouts));
  ASSIGN_OR_RETURN(const std::vector<v1::Rollout> rollouts, fleet_->rollouts.List());
  FleetState& fleet = fleet_->queries.state();
  const std::shared_ptr<const Snapshot> snapshot = fleet.CurrentSnapshot();
  return server::PlanRollout(request, *snapshot->policy, rollouts, fleet.store(),
                             SystemClockInstance()->Now());
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
