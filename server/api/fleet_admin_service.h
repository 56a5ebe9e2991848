// weightpath.v1.FleetAdmin: the operators' service. Each call first proves
// an operator identity (OperatorAuth), then hands the request to the
// handler object for its RPC group: FleetQueries for devices, summary and
// verification, RolloutAdmin for rollouts, the explainer for
// ExplainDecision.
//
// Audit trail: every call whose RPC needs more than the viewer role (the
// mutating ones, fleet_admin_roles.cc) is recorded in the fleet store once
// its handler has answered: identity, role, RPC, target, a bounded one-line
// request summary (api/audit_event.h), the result's code name and message,
// and this replica's name (--replica_name). Calls refused for their role and by
// validation are recorded too, up to a budget per identity (a burst of 30,
// then one every 2 s: server/security/refusal_budget.h), beyond which they
// are counted (weightpath_audit_refusals_not_recorded_total) and the next
// recorded refusal says how many were left out; so is any RPC added later,
// as long as its handler passes through Admit. Not recorded: a call without a valid
// credential (no identity to record, and anyone who can reach the port
// would otherwise grow the table; the refusal is logged with the peer), a
// request that does not parse, and one refused before its handler ran
// (queue full). The record is written on the same store worker before the
// answer is sent, so the caller that sees the result can list its event. A
// refused audit write does not change the call's answer: a mutation the
// store committed cannot be taken back, and an error would invite a retry
// that mutates twice; it is counted (weightpath_audit_write_failures_total,
// alerted on) and the whole event is logged at error level instead. Since
// the mutation and its record go to the same store one after the other,
// both fail together when the store is down. With --store=none nothing is
// recorded (every mutating call is refused there anyway) and
// ListAuditEvents is FAILED_PRECONDITION.
//
// Every method is a raw callback method served through ServeStoreCall
// (server/store_call.h): these calls read and write the database and may
// wait on it, so they run on the store executor, never on the callback
// threads ResolveWeightPath depends on, and a malformed request gets
// INVALID_ARGUMENT naming its type.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "server/fleet/fleet_queries.h"
#include "server/security/operator_auth.h"
#include "server/security/refusal_budget.h"
#include "server/rollout/rollout_admin.h"
#include "server/api/store_call.h"
#include "server/fleet/store_executor.h"
#include "weightpath/v1/fleet_admin.grpc.pb.h"

namespace weightpath::server {

inline constexpr char kFleetAdminServiceName[] = "weightpath.v1.FleetAdmin";

// The host name ("unknown" when it cannot be read), bounded and escaped as
// an audit field; part of the default replica name (server.cc).
std::string ThisHostName();

class FleetAdminService final
    : public v1::FleetAdmin::WithRawCallbackMethod_ListDevices<
          v1::FleetAdmin::WithRawCallbackMethod_GetDevice<
          v1::FleetAdmin::WithRawCallbackMethod_FleetSummary<
          v1::FleetAdmin::WithRawCallbackMethod_GetVerificationMatrix<
          v1::FleetAdmin::WithRawCallbackMethod_CreateRollout<
          v1::FleetAdmin::WithRawCallbackMethod_GetRollout<
          v1::FleetAdmin::WithRawCallbackMethod_ListRollouts<
          v1::FleetAdmin::WithRawCallbackMethod_PauseRollout<
          v1::FleetAdmin::WithRawCallbackMethod_ResumeRollout<
          v1::FleetAdmin::WithRawCallbackMethod_AdvanceRollout<
          v1::FleetAdmin::WithRawCallbackMethod_AbortRollout<
          v1::FleetAdmin::WithRawCallbackMethod_UpdateRollout<
          v1::FleetAdmin::WithRawCallbackMethod_DeleteRollout<
          v1::FleetAdmin::WithRawCallbackMethod_ExplainDecision<
          v1::FleetAdmin::WithRawCallbackMethod_ListAuditEvents<
          v1::FleetAdmin::WithRawCallbackMethod_ListRolloutDevices<
          v1::FleetAdmin::WithRawCallbackMethod_PlanPolicy<
          v1::FleetAdmin::WithRawCallbackMethod_PlanRollout<
          v1::FleetAdmin::CallbackService>>>>>>>>>>>>>>>>>> {
 public:
  // The fleet registry's queries and the rollout operations, with a fleet
  // store. Without one (--store=none) the service gets kNoFleet: every
  // fleet and rollout call is FAILED_PRECONDITION naming --store.
  struct Fleet {
    FleetQueries& queries;
    RolloutAdmin& rollouts;
  };
  static constexpr std::nullopt_t kNoFleet = std::nullopt;
  // ExplainDecision (api/fleet_admin_rollouts.cc), with or without a store.
  using ExplainFunction = std::function<absl::StatusOr<v1::ExplainDecisionResponse>(
      const v1::ExplainDecisionRequest&)>;

  // `store_executor` runs every call and, like `metrics`, must outlive them.
  // `replica` is AuditEvent.replica (--replica_name, or its default).
  FleetAdminService(const OperatorAuth* auth, std::optional<Fleet> fleet, ExplainFunction explain,
                    StoreExecutor* store_executor, ServerMetrics* metrics, std::string replica)
      : auth_(auth),
        fleet_(fleet),
        explain_(std::move(explain)),
        store_executor_(store_executor),
        metrics_(metrics),
        replica_(std::move(replica)) {}

  // Wire bytes in and out; clients see the ordinary typed methods.
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetDevice(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* FleetSummary(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetVerificationMatrix(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CreateRollout(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetRollout(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListRollouts(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PauseRollout(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ResumeRollout(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* AdvanceRollout(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* AbortRollout(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UpdateRollout(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DeleteRollout(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PlanPolicy(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PlanRollout(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ExplainDecision(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListAuditEvents(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListRolloutDevices(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) override;

 private:
  template <typename Request, typename Response>
  using Handler = absl::StatusOr<Response> (FleetAdminService::*)(const grpc::ServerContextBase&,
                                                                  const Request&);
  // Parses, then runs `handler` on the store executor (ServeStoreCall);
  // `method` labels its answers in weightpath_rpc_requests_total.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Serve(const char* method, grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request_bytes,
                                  grpc::ByteBuffer* response_bytes,
                                  Handler<Request, Response> handler);

  // The typed handlers, run on a store worker.
  absl::StatusOr<v1::ListDevicesResponse> HandleListDevices(const grpc::ServerContextBase& context,
                                                            const v1::ListDevicesRequest& request);
  absl::StatusOr<v1::Device> HandleGetDevice(const grpc::ServerContextBase& context,
                                             const v1::GetDeviceRequest& request);
  absl::StatusOr<v1::FleetSummaryResponse> HandleFleetSummary(
      const grpc::ServerContextBase& context, const v1::FleetSummaryRequest& request);
  absl::StatusOr<v1::GetVerificationMatrixResponse> HandleGetVerificationMatrix(
      const grpc::ServerContextBase& context, const v1::GetVerificationMatrixRequest& request);
  absl::StatusOr<v1::Rollout> HandleCreateRollout(const grpc::ServerContextBase& context,
                                                  const v1::CreateRolloutRequest& request);
  absl::StatusOr<v1::Rollout> HandleGetRollout(const grpc::ServerContextBase& context,
                                               const v1::GetRolloutRequest& request);
  absl::StatusOr<v1::ListRolloutsResponse> HandleListRollouts(
      const grpc::ServerContextBase& context, const v1::ListRolloutsRequest& request);
  absl::StatusOr<v1::Rollout> HandlePauseRollout(const grpc::ServerContextBase& context,
                                                 const v1::RolloutControlRequest& request);
  absl::StatusOr<v1::Rollout> HandleResumeRollout(const grpc::ServerContextBase& context,
                                                  const v1::RolloutControlRequest& request);
  absl::StatusOr<v1::Rollout> HandleAdvanceRollout(const grpc::ServerContextBase& context,
                                                   const v1::RolloutControlRequest& request);
  absl::StatusOr<v1::Rollout> HandleAbortRollout(const grpc::ServerContextBase& context,
                                                 const v1::RolloutControlRequest& request);
  absl::StatusOr<v1::Rollout> HandleUpdateRollout(const grpc::ServerContextBase& context,
                                                  const v1::UpdateRolloutRequest& request);
  absl::StatusOr<v1::DeleteRolloutResponse> HandleDeleteRollout(
      const grpc::ServerContextBase& context, const v1::DeleteRolloutRequest& request);
  absl::StatusOr<v1::ExplainDecisionResponse> HandleExplainDecision(
      const grpc::ServerContextBase& context, const v1::ExplainDecisionRequest& request);
  absl::StatusOr<v1::PlanPolicyResponse> HandlePlanPolicy(const grpc::ServerContextBase& context,
                                                          const v1::PlanPolicyRequest& request);
  absl::StatusOr<v1::PlanRolloutResponse> HandlePlanRollout(
      const grpc::ServerContextBase& context, const v1::PlanRolloutRequest& request);
  absl::StatusOr<v1::ListAuditEventsResponse> HandleListAuditEvents(
      const grpc::ServerContextBase& context, const v1::ListAuditEventsRequest& request);
  absl::StatusOr<v1::ListRolloutDevicesResponse> HandleListRolloutDevices(
      const grpc::ServerContextBase& context, const v1::ListRolloutDevicesRequest& request);

  // What a call needs besides an operator identity.
  enum class Needs {
    kOperatorOnly,   // ExplainDecision of a full request reads no store
    kFleetRegistry,  // the device, summary and verification queries
    kRollouts,       // the rollout operations (a fleet store)
    kAuditTrail,     // ListAuditEvents (a fleet store)
  };
  // The one admission of every FleetAdmin call: OK when the caller is an
  // operator (a refusal is logged with the peer) and what `needs` names is
  // there; FAILED_PRECONDITION naming --store when it is not.
  absl::Status Admit(const grpc::ServerContextBase& context, const char* method, Needs needs) const;

  // What Admit learnt about the call this store worker runs, for its audit
  // record: Serve's lambda owns it for the length of the handler, and Admit
  // fills it through a thread-local pointer, so no handler passes it along.
  struct AdmittedCall {
    const char* method = nullptr;  // set once Admit ran
    bool authenticated = false;
    std::string identity;
    Role role = Role::kViewer;
    bool audited = false;  // the RPC needs more than the viewer role
  };
  // Runs `handle` (the typed handler, writing its result where the caller
  // reads it) with an AdmittedCall in place, then records the audit event
  // when the call is audited.
  void RunAudited(const google::protobuf::Message& request,
                  absl::FunctionRef<absl::Status()> handle) const;
  static thread_local AdmittedCall* admitted_call_;

  const OperatorAuth* const auth_;
  const std::optional<Fleet> fleet_;
  const ExplainFunction explain_;
  StoreExecutor* const store_executor_;
  ServerMetrics* const metrics_;
  // AuditEvent.replica: --replica_name (the pod's name under the Helm
  // chart), or HOSTNAME/HOST:PORT.
  const std::string replica_;
  // Refused calls written per identity (server/security/refusal_budget.h).
  mutable RefusalBudget refusal_budget_{RefusalBudget::Options{}, SystemClockInstance()};
};

template <typename Request, typename Response>
grpc::ServerUnaryReactor* FleetAdminService::Serve(const char* method,
                                                   grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request_bytes,
                                                   grpc::ByteBuffer* response_bytes,
                                                   Handler<Request, Response> handler) {
  return ServeStoreCall<Request>(
      CountedAs{metrics_, method}, context, request_bytes, response_bytes, store_executor_,
      [this, context, handler](const Request& request) {
        absl::StatusOr<Response> result;
        RunAudited(request, [&] {
          result = (this->*handler)(*context, request);
          return result.status();
        });
        return result;
      });
}

}  // namespace weightpath::server
