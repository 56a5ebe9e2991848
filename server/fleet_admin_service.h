// weightpath.v1.FleetAdmin: the operators' service. Each call first proves
// an operator identity (OperatorAuth), then hands the request to the
// handler object for its RPC group: FleetQueries for devices, summary and
// verification. The rollout RPCs and ExplainDecision stay with the
// generated base (UNIMPLEMENTED) until their handler is added the same way.
//
// The synchronous API is used on purpose: these calls read the database and
// may block, and a synchronous handler blocks its own pool thread rather
// than one of the callback threads ResolveWeightPath depends on.
#pragma once

#include <functional>

#include "server/fleet_queries.h"
#include "server/rollout_admin.h"
#include "server/operator_auth.h"
#include "weightpath/v1/fleet_admin.grpc.pb.h"

namespace weightpath::server {

inline constexpr char kFleetAdminServiceName[] = "weightpath.v1.FleetAdmin";

class FleetAdminService final : public v1::FleetAdmin::Service {
 public:
  // `fleet_queries` may be null (--store=none): every fleet call then gets
  // FAILED_PRECONDITION naming --store.
  FleetAdminService(const OperatorAuth* auth, FleetQueries* fleet_queries)
      : auth_(auth), fleet_queries_(fleet_queries) {}

  grpc::Status ListDevices(grpc::ServerContext* context, const v1::ListDevicesRequest* request,
                           v1::ListDevicesResponse* response) override;
  grpc::Status GetDevice(grpc::ServerContext* context, const v1::GetDeviceRequest* request,
                         v1::Device* response) override;
  grpc::Status FleetSummary(grpc::ServerContext* context, const v1::FleetSummaryRequest* request,
                            v1::FleetSummaryResponse* response) override;
  grpc::Status GetVerificationMatrix(grpc::ServerContext* context,
                                     const v1::GetVerificationMatrixRequest* request,
                                     v1::GetVerificationMatrixResponse* response) override;

  // Rollout RPCs and ExplainDecision, in rollout_admin_rpcs.cc. Without
  // SetRolloutHandlers (--store=none) the rollout calls are
  // FAILED_PRECONDITION naming --store.
  using ExplainFunction = std::function<absl::StatusOr<v1::ExplainDecisionResponse>(
      const v1::ExplainDecisionRequest&)>;
  void SetRolloutHandlers(RolloutAdmin* rollouts, ExplainFunction explain);
  grpc::Status CreateRollout(grpc::ServerContext* context, const v1::CreateRolloutRequest* request,
                             v1::Rollout* response) override;
  grpc::Status GetRollout(grpc::ServerContext* context, const v1::GetRolloutRequest* request,
                          v1::Rollout* response) override;
  grpc::Status ListRollouts(grpc::ServerContext* context, const v1::ListRolloutsRequest* request,
                            v1::ListRolloutsResponse* response) override;
  grpc::Status PauseRollout(grpc::ServerContext* context, const v1::RolloutControlRequest* request,
                            v1::Rollout* response) override;
  grpc::Status ResumeRollout(grpc::ServerContext* context, const v1::RolloutControlRequest* request,
                             v1::Rollout* response) override;
  grpc::Status AdvanceRollout(grpc::ServerContext* context, const v1::RolloutControlRequest* request,
                              v1::Rollout* response) override;
  grpc::Status AbortRollout(grpc::ServerContext* context, const v1::RolloutControlRequest* request,
                            v1::Rollout* response) override;
  grpc::Status ExplainDecision(grpc::ServerContext* context,
                               const v1::ExplainDecisionRequest* request,
                               v1::ExplainDecisionResponse* response) override;

 private:
  absl::Status AdmitRollouts(const grpc::ServerContext& context, const char* method) const;
  RolloutAdmin* rollouts_ = nullptr;
  ExplainFunction explain_;

  // OK when the caller is an operator and the fleet store is configured.
  absl::Status Admit(const grpc::ServerContext& context, const char* method) const;

  const OperatorAuth* const auth_;
  FleetQueries* const fleet_queries_;
};

}  // namespace weightpath::server
