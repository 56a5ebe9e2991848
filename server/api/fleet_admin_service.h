// weightpath.v1.FleetAdmin: the operators' service. Each call first proves
// an operator identity (OperatorAuth), then hands the request to the
// handler object for its RPC group: FleetQueries for devices, summary and
// verification, RolloutAdmin for rollouts, the explainer for
// ExplainDecision.
//
// Every method is a raw callback method served through ServeStoreCall
// (server/store_call.h): these calls read and write the database and may
// wait on it, so they run on the store executor, never on the callback
// threads ResolveWeightPath depends on, and a malformed request gets
// INVALID_ARGUMENT naming its type.
#pragma once

#include <optional>
#include <utility>

#include <functional>

#include "absl/status/statusor.h"
#include "server/fleet/fleet_queries.h"
#include "server/security/operator_auth.h"
#include "server/rollout/rollout_admin.h"
#include "server/api/store_call.h"
#include "server/fleet/store_executor.h"
#include "weightpath/v1/fleet_admin.grpc.pb.h"

namespace weightpath::server {

inline constexpr char kFleetAdminServiceName[] = "weightpath.v1.FleetAdmin";

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
          v1::FleetAdmin::CallbackService>>>>>>>>>>>>>> {
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

  // `store_executor` runs every call and must outlive them.
  FleetAdminService(const OperatorAuth* auth, std::optional<Fleet> fleet, ExplainFunction explain,
                    StoreExecutor* store_executor)
      : auth_(auth), fleet_(fleet), explain_(std::move(explain)), store_executor_(store_executor) {}

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
  grpc::ServerUnaryReactor* ExplainDecision(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;

 private:
  template <typename Request, typename Response>
  using Handler = absl::StatusOr<Response> (FleetAdminService::*)(const grpc::ServerContextBase&,
                                                                  const Request&);
  // Parses, then runs `handler` on the store executor (ServeStoreCall).
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context,
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

  // What a call needs besides an operator identity.
  enum class Needs {
    kOperatorOnly,   // ExplainDecision of a full request reads no store
    kFleetRegistry,  // the device, summary and verification queries
    kRollouts,       // the rollout operations (a fleet store)
  };
  // The one admission of every FleetAdmin call: OK when the caller is an
  // operator (a refusal is logged with the peer) and what `needs` names is
  // there; FAILED_PRECONDITION naming --store when it is not.
  absl::Status Admit(const grpc::ServerContextBase& context, const char* method, Needs needs) const;

  const OperatorAuth* const auth_;
  const std::optional<Fleet> fleet_;
  const ExplainFunction explain_;
  StoreExecutor* const store_executor_;
};

template <typename Request, typename Response>
grpc::ServerUnaryReactor* FleetAdminService::Serve(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request_bytes,
                                                   grpc::ByteBuffer* response_bytes,
                                                   Handler<Request, Response> handler) {
  return ServeStoreCall<Request>(
      context, request_bytes, response_bytes, store_executor_,
      [this, context, handler](const Request& request) { return (this->*handler)(*context, request); });
}

}  // namespace weightpath::server
