// The gRPC face of the resolver: validate, check the caller's identity under
// mutual TLS, resolve against the current snapshot, count, answer. Uses the
// callback API so no thread is parked per call, and serves
// ResolveWeightPath as a raw method (server/resolve_wire.h says why); the
// reports are raw methods too, run on the store executor
// (server/store_call.h).
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/grpc_status.h"
#include "deploy/resolve_interval.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/security/device_call_limits.h"
#include "server/security/operator_auth.h"
#include "server/fleet/fleet_state.h"
#include "server/rollout/rollout_cache.h"
#include "server/rollout/rollout_metrics.h"
#include "server/observability/metrics.h"
#include "server/config/policy_snapshot.h"
#include "server/resolve/profile_memo.h"
#include "server/wire/request_decoder.h"
#include "server/wire/resolve_wire.h"
#include "server/resolve/resolver.h"
#include "server/fleet/store_executor.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace weightpath::server {

// Answers a unary callback call with `status` through ToGrpcStatus
// (common/grpc_status.h); a retry pushback it carries
// (common/retry_pushback.h) goes out as the grpc-retry-pushback-ms trailer.
void FinishCall(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                const absl::Status& status);

// With a fleet (not --store=none) each answered resolve is recorded and its
// verification comes from fleet evidence; ReportMeasurement stores what the
// device measured, ReportOutcome how a rollout went for it.
//
// All three methods are raw: clients see the ordinary typed methods.
class WeightPathService final
    : public v1::WeightPath::WithRawCallbackMethod_ResolveWeightPath<
          v1::WeightPath::WithRawCallbackMethod_ReportMeasurement<
              v1::WeightPath::WithRawCallbackMethod_ReportOutcome<v1::WeightPath::CallbackService>>> {
 public:
  // What a server with a fleet store serves from: resolves record their
  // sighting and read fleet evidence and the rollouts (from the cache, never
  // the database); reports go to the store. A server without one
  // (--store=none) passes kNoFleet: resolves answer from the policy alone
  // and reports are FAILED_PRECONDITION naming --store.
  struct Fleet {
    FleetState& state;
    RolloutCache& rollouts;
    RolloutMetrics& rollout_metrics;
  };
  static constexpr std::nullopt_t kNoFleet = std::nullopt;

  // `store_executor` runs the reports (they commit before answering), and
  // must outlive every call. `limits` (may be null: none) admit each device
  // call before its work.
  // `operators` (may be null: none) lets an operator certificate dry-run a
  // resolve under mutual TLS (see AdmitDevice); it must outlive the service.
  WeightPathService(const SnapshotHolder* snapshots, ServerMetrics* metrics,
                    bool require_client_identity, std::optional<Fleet> fleet,
                    StoreExecutor* store_executor, DeviceCallLimits* limits = nullptr,
                    deploy::ResolveIntervalSettings intervals = {},
                    const OperatorAuth* operators = nullptr);

  // Answered on the callback thread: a resolve never touches the store.
  grpc::ServerUnaryReactor* ResolveWeightPath(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request_bytes,
                                              grpc::ByteBuffer* response_bytes) override;

  // Both through ServeStoreCall (server/store_call.h): their commits run on
  // the store executor.
  grpc::ServerUnaryReactor* ReportMeasurement(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request_bytes,
                                              grpc::ByteBuffer* response_bytes) override;
  grpc::ServerUnaryReactor* ReportOutcome(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request_bytes,
                                          grpc::ByteBuffer* response_bytes) override;

 private:
  // What every device call checks first: the request's own validation, then
  // under mutual TLS that the caller's certificate names `device_id`. A
  // `dry_run` resolve is also admitted from an operator certificate (any
  // role of `operators`): an operator trying a profile speaks for no device,
  // and the dry run records nothing, so it needs no device identity.
  absl::Status AdmitDevice(const grpc::CallbackServerContext& context, absl::Status validation,
                           const std::string& device_id, bool dry_run = false) const;
  // The overload guards for one device call (OK and nothing held when there
  // are none); a refusal is counted, not logged: a device in a retry loop
  // would otherwise write a line per call.
  absl::StatusOr<DeviceCallLimits::Admission> AdmitLoad(DeviceCallMethod method,
                                                        absl::string_view device_id,
                                                        int64_t now_ns) const;
  // A refused device call, logged with its code; `device_id` is echoed only
  // once it is valid, so a hostile value never reaches the log verbatim.
  static void LogRefused(absl::string_view method, const std::string& device_id,
                         const absl::Status& status);
  // The typed reports, run on a store worker. ReportOutcome's is in
  // weightpath_service_outcomes.cc and needs a fleet store.
  absl::StatusOr<v1::ReportMeasurementResponse> RecordMeasurement(
      const grpc::CallbackServerContext& context, const v1::ReportMeasurementRequest& request);
  absl::StatusOr<v1::ReportOutcomeResponse> RecordOutcome(const grpc::CallbackServerContext& context,
                                                          const v1::ReportOutcomeRequest& request);
  // `result`, with a refusal logged.
  template <typename Response>
  static absl::StatusOr<Response> LoggedIfRefused(absl::string_view method,
                                                  const std::string& device_id,
                                                  absl::StatusOr<Response> result) {
    if (!result.ok()) LogRefused(method, device_id, result.status());
    return result;
  }

  // Everything after parsing: validation, identity, decision, fleet, the
  // encoded answer. `head`: the request's, when it has the plain shape
  // (DecodeRequestHead); a call that passes is then remembered in memo_.
  absl::Status AnswerResolve(grpc::CallbackServerContext* context,
                             const v1::ResolveWeightPathRequest& request, const RequestHead* head,
                             v1::ResolveWeightPathResponse* per_call, ResolveSummary* summary,
                             grpc::ByteBuffer* response_bytes);
  // The policy's decision for a plain request whose profile memo_ knows
  // (server/resolve/profile_memo.h), when nothing else the memo cannot see decides:
  // no rollouts, a policy that reads no labels. `snapshot` is the call's
  // (held by the caller's Pin); false when the memo does not hold it.
  bool FindKnownDecision(const RequestHead& head, const Snapshot& snapshot,
                         policy::Decision* decision) const;
  // The answer to such a request, admitted already: its head passes
  // validation and its profile is one memo_ holds as valid. false, with
  // nothing sent and nothing recorded, for anything else to settle (a
  // fault, a refused identity, an unknown model): the full path then
  // answers it as it answers every request.
  bool AnswerKnown(grpc::CallbackServerContext* context, const RequestHead& head,
                   absl::string_view wire, const policy::Decision& decision,
                   const Snapshot& snapshot, ResolveScratch* scratch, ResolveSummary* summary,
                   grpc::ByteBuffer* response_bytes);
  // The answer once the decision is made (both paths): decided part,
  // per-call part and etag, the fleet's sighting, "unchanged" or the full
  // answer with the fleet's evidence. `profile_wire`: the request's profile
  // field as sent, when the wire decoder found it (the registry keeps it).
  void AnswerDecided(const v1::ResolveWeightPathRequest& request, const Snapshot& snapshot,
                     const ResolvedDecision& decision, v1::ResolveWeightPathResponse* per_call,
                     ResolveSummary* summary, grpc::ByteBuffer* response_bytes,
                     absl::string_view profile_wire);
  // After the full path answered a plain request: its profile's decisions
  // for memo_, when the call was one the memo may answer next time.
  // `hardware_class` is the profile's, as validation computed it.
  void RememberProfile(const v1::ResolveWeightPathRequest& request, const RequestHead& head,
                       policy::HardwareClass hardware_class, const Snapshot& snapshot,
                       const std::vector<v1::Rollout>& rollouts);

  const SnapshotHolder* const snapshots_;
  ServerMetrics* const metrics_;
  const bool require_client_identity_;
  const std::optional<Fleet> fleet_;
  StoreExecutor* const store_executor_;
  DeviceCallLimits* const limits_;
  const deploy::ResolveIntervalSettings intervals_;
  const OperatorAuth* const operators_;
  // Verdicts and decisions by profile bytes (fixed memory, see its header).
  mutable ProfileMemo memo_;
};


}  // namespace weightpath::server
