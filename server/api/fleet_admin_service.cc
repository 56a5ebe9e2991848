#include "server/api/fleet_admin_service.h"

#include <unistd.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "server/api/audit_event.h"
#include "server/api/fleet_admin_roles.h"
#include "server/api/policy_plan.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {

// One call at a time per thread: a handler runs to its end on its worker.
thread_local FleetAdminService::AdmittedCall* FleetAdminService::admitted_call_ = nullptr;

std::string ThisHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown";
  return AuditText(name, kAuditFieldMaxBytes);
}

absl::Status FleetAdminService::Admit(const grpc::ServerContextBase& context, const char* method,
                                      Needs needs) const {
  const std::optional<Role> needs_role = RoleNeededFor(method);
  if (admitted_call_ != nullptr) {
    admitted_call_->method = method;
    // An RPC missing from the table is refused below, before anyone is
    // authenticated, so it has no event; it cannot pass the descriptor test.
    admitted_call_->audited = needs_role.has_value() && *needs_role > Role::kViewer;
  }
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
  if (admitted_call_ != nullptr) {
    admitted_call_->authenticated = true;
    admitted_call_->identity = caller->identity;
    admitted_call_->role = caller->role;
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
    case Needs::kAuditTrail:
      if (!fleet_.has_value()) {
        return absl::FailedPreconditionError(
            "the server runs with --store=none: there is no store to keep the audit trail in");
      }
      break;
  }
  return absl::OkStatus();
}

void FleetAdminService::RunAudited(const google::protobuf::Message& request,
                                   absl::FunctionRef<absl::Status()> handle) const {
  AdmittedCall call;
  const absl::Time started = absl::Now();
  admitted_call_ = &call;
  const absl::Status result = handle();
  admitted_call_ = nullptr;
  if (!call.audited || !call.authenticated) return;
  v1::AuditEvent event;
  *event.mutable_time() = ToProtoTime(started);
  event.set_identity(AuditText(call.identity, kAuditFieldMaxBytes));
  event.set_role(std::string(RoleName(call.role)));
  event.set_rpc(call.method);
  event.set_target(AuditTarget(request));
  event.set_request_summary(AuditRequestSummary(request));
  event.set_result(absl::StatusCodeToString(result.code()));
  std::string message = AuditText(result.message(), kAuditMessageMaxBytes);
  if (!result.ok()) {
    const RefusalBudget::Decision decision = refusal_budget_.Take(call.identity);
    if (!decision.record) {
      metrics_->RecordAuditRefusalNotRecorded();
      return;
    }
    if (decision.left_out_before > 0) {
      absl::StrAppend(&message, " [", decision.left_out_before,
                      " earlier refused calls by this identity not recorded: past its budget]");
    }
  }
  event.set_message(std::move(message));
  event.set_replica(replica_);
  if (!fleet_.has_value()) {
    // --store=none: every mutating call is refused; the log is the trail.
    spdlog::info("FleetAdmin.{} by \"{}\" ({}) on \"{}\": {} {}", event.rpc(), event.identity(),
                 event.role(), event.target(), event.result(), event.message());
    return;
  }
  // A refusal is counted and logged whole by FleetState; the call's answer
  // stands (see the header).
  fleet_->queries.RecordAuditEvent(event).IgnoreError();
}

grpc::ServerUnaryReactor* FleetAdminService::ListAuditEvents(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/ListAuditEvents", context, request, response,
               &FleetAdminService::HandleListAuditEvents);
}

absl::StatusOr<v1::ListAuditEventsResponse> FleetAdminService::HandleListAuditEvents(
    const grpc::ServerContextBase& context, const v1::ListAuditEventsRequest& request) {
  RETURN_IF_ERROR(Admit(context, "ListAuditEvents", Needs::kAuditTrail));
  return fleet_->queries.ListAuditEvents(request);
}

grpc::ServerUnaryReactor* FleetAdminService::ListDevices(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/ListDevices", context, request, response,
               &FleetAdminService::HandleListDevices);
}

grpc::ServerUnaryReactor* FleetAdminService::GetDevice(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/GetDevice", context, request, response,
               &FleetAdminService::HandleGetDevice);
}

grpc::ServerUnaryReactor* FleetAdminService::FleetSummary(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/FleetSummary", context, request, response,
               &FleetAdminService::HandleFleetSummary);
}

grpc::ServerUnaryReactor* FleetAdminService::GetVerificationMatrix(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/GetVerificationMatrix", context, request, response,
               &FleetAdminService::HandleGetVerificationMatrix);
}

grpc::ServerUnaryReactor* FleetAdminService::PlanPolicy(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Serve("FleetAdmin/PlanPolicy", context, request, response,
               &FleetAdminService::HandlePlanPolicy);
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

absl::StatusOr<v1::PlanPolicyResponse> FleetAdminService::HandlePlanPolicy(
    const grpc::ServerContextBase& context, const v1::PlanPolicyRequest& request) {
  RETURN_IF_ERROR(Admit(context, "PlanPolicy", Needs::kFleetRegistry));
  FleetState& fleet = fleet_->queries.state();
  const std::shared_ptr<const Snapshot> snapshot = fleet.CurrentSnapshot();
  return server::PlanPolicy(request, *snapshot->policy, fleet.store(),
                            SystemClockInstance()->Now());
}

absl::StatusOr<v1::GetVerificationMatrixResponse> FleetAdminService::HandleGetVerificationMatrix(
    const grpc::ServerContextBase& context, const v1::GetVerificationMatrixRequest& /*request*/) {
  RETURN_IF_ERROR(Admit(context, "GetVerificationMatrix", Needs::kFleetRegistry));
  return fleet_->queries.VerificationMatrix();
}

}  // namespace weightpath::server
