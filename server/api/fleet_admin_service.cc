#include "server/api/fleet_admin_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/api/fleet_admin_roles.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {

absl::Status FleetAdminService::Admit(const grpc::ServerContextBase& context, const char* method,
                                      Needs needs) const {
  const std::optional<Role> needs_role = RoleNeededFor(method);
  if (!needs_role.has_value()) {
    // Unreachable while the descriptor test holds; refused rather than served.
    return absl::InternalError(absl::StrCat("FleetAdmin.", method, " has no role in the table"));
  }
  absl::StatusOr<Caller> caller = auth_->Authenticate(context);
  if (!caller.ok()) {
    spdlog::warn("FleetAdmin.{} from {} refused: {}", method, context.peer(),
                 caller.status().ToString());
    return caller.status();
  }
  if (caller->role < *needs_role) {
    absl::Status denied = absl::PermissionDeniedError(absl::StrCat(
        "FleetAdmin.", method, " needs role ", RoleName(*needs_role), "; the caller \"",
        caller->identity, "\" has role ", RoleName(caller->role)));
    spdlog::warn("FleetAdmin.{} from {} refused: {}", method, context.peer(), denied.ToString());
    return denied;
  }
  switch (needs) {
    case Needs::kOperatorOnly:
      break;
    case Needs::kFleetRegistry:
      if (!fleet_.has_value()) {
        return absl::FailedPreconditionError(
            "the server runs with --store=none: there is no fleet registry to read");
      }
      break;
    case Needs::kRollouts:
      if (!fleet_.has_value()) {
        return absl::FailedPreconditionError(
            "the server runs with --store=none: rollouts need a fleet store shared by the replicas");
      }
      break;
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* FleetAdminService::ListDevices(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleListDevices);
}

grpc::ServerUnaryReactor* FleetAdminService::GetDevice(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleGetDevice);
}

grpc::ServerUnaryReactor* FleetAdminService::FleetSummary(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleFleetSummary);
}

grpc::ServerUnaryReactor* FleetAdminService::GetVerificationMatrix(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Serve(context, request, response, &FleetAdminService::HandleGetVerificationMatrix);
}

absl::StatusOr<v1::ListDevicesResponse> FleetAdminService::HandleListDevices(
    const grpc::ServerContextBase& context, const v1::ListDevicesRequest& request) {
  RETURN_IF_ERROR(Admit(context, "ListDevices", Needs::kFleetRegistry));
  return fleet_->queries.ListDevices(request);
}

absl::StatusOr<v1::Device> FleetAdminService::HandleGetDevice(const grpc::ServerContextBase& context,
                                                              const v1::GetDeviceRequest& request) {
  RETURN_IF_ERROR(Admit(context, "GetDevice", Needs::kFleetRegistry));
  return fleet_->queries.GetDevice(request);
}

absl::StatusOr<v1::FleetSummaryResponse> FleetAdminService::HandleFleetSummary(
    const grpc::ServerContextBase& context, const v1::FleetSummaryRequest& request) {
  RETURN_IF_ERROR(Admit(context, "FleetSummary", Needs::kFleetRegistry));
  return fleet_->queries.FleetSummary(request);
}

absl::StatusOr<v1::GetVerificationMatrixResponse> FleetAdminService::HandleGetVerificationMatrix(
    const grpc::ServerContextBase& context, const v1::GetVerificationMatrixRequest& /*request*/) {
  RETURN_IF_ERROR(Admit(context, "GetVerificationMatrix", Needs::kFleetRegistry));
  return fleet_->queries.VerificationMatrix();
}

}  // namespace weightpath::server
