#include "server/api/weightpath_service.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/retry_pushback.h"
#include "common/status_macros.h"
#include "server/resolve/request_validation.h"
#include "server/wire/resolve_wire.h"
#include "server/wire/response_cache.h"
#include "server/resolve/resolver.h"
#include "server/api/store_call.h"
#include "server/security/tls.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

const std::vector<v1::Rollout> kNoRollouts;

}  // namespace

void FinishCall(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                const absl::Status& status) {
  if (const std::optional<absl::Duration> pushback = RetryPushback(status)) {
    context->AddTrailingMetadata(
        kRetryPushbackHeader,
        *pushback == absl::InfiniteDuration() ? std::string("-1")
                                              : std::to_string(absl::ToInt64Milliseconds(*pushback)));
  }
  reactor->Finish(ToGrpcStatus(status));
}

WeightPathService::WeightPathService(const SnapshotHolder* snapshots, ServerMetrics* metrics,
                                     bool require_client_identity, FleetState* fleet,
                                     StoreExecutor* store_executor, DeviceCallLimits* limits)
    : snapshots_(snapshots),
      metrics_(metrics),
      require_client_identity_(require_client_identity),
      fleet_(fleet),
      store_executor_(store_executor),
      limits_(limits != nullptr && limits->enabled() ? limits : nullptr) {}

absl::StatusOr<DeviceCallLimits::Admission> WeightPathService::AdmitLoad(
    DeviceCallMethod method, absl::string_view device_id, int64_t now_ns) const {
  if (limits_ == nullptr) return DeviceCallLimits::Admission();
  ShedReason reason = ShedReason::kNone;
  absl::StatusOr<DeviceCallLimits::Admission> admission = limits_->Admit(device_id, now_ns, &reason);
  if (!admission.ok()) metrics_->RecordShed(method, reason);
  return admission;
}

grpc::ServerUnaryReactor* WeightPathService::ResolveWeightPath(grpc::CallbackServerContext* context,
                                                               const grpc::ByteBuffer* request_bytes,
                                                               grpc::ByteBuffer* response_bytes) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!request_bytes->Valid()) {
    // The call ended before its message arrived (the client reset the
    // stream). A typed handler is never called for one; answer as gRPC
    // does there and leave the resolve counters and the log alone.
    reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL, "No payload"));
    return reactor;
  }
  const auto started = std::chrono::steady_clock::now();
  ResolveScratch& scratch = ThreadResolveScratch();
  ResolveSummary summary;
  // The copy shares the received slices; it only exists because parsing
  // reads through a non-const buffer.
  grpc::ByteBuffer received(*request_bytes);
  absl::Status status = ParseResolveRequest(&received, &scratch);
  bool shed = false;
  if (status.ok()) {
    // Its in-flight place is held while the answer is worked out.
    absl::StatusOr<DeviceCallLimits::Admission> admission =
        AdmitLoad(DeviceCallMethod::kResolve, scratch.request.device_id(), SteadyNanos(started));
    shed = !admission.ok();
    status = shed ? admission.status()
                  : AnswerResolve(context, scratch.request, &scratch.per_call, &summary,
                                  response_bytes);
  }
  if (!status.ok() && !shed) LogRefused("ResolveWeightPath", scratch.request.device_id(), status);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
  metrics_->RecordResolve(summary, static_cast<int>(status.code()), elapsed.count());
  FinishCall(context, reactor, status);
  return reactor;
}

absl::Status WeightPathService::AnswerResolve(grpc::CallbackServerContext* context,
                                              const v1::ResolveWeightPathRequest& request,
                                              v1::ResolveWeightPathResponse* per_call,
                                              ResolveSummary* summary,
                                              grpc::ByteBuffer* response_bytes) {
  RETURN_IF_ERROR(AdmitDevice(*context, ValidateResolveRequest(request), request.device_id()));
  // Both stay valid for the whole call; a refresh or reload publishes new ones.
  const RolloutCache::Rollouts& rollouts = rollouts_ != nullptr ? rollouts_->ForThisCall() : kNoRollouts;
  const Snapshot& snapshot = snapshots_->Current();
  ASSIGN_OR_RETURN(const ResolvedDecision decision, Decide(request, snapshot, summary, rollouts));
  const DecidedPart& decided = ThreadDecidedPartCache().Find(*snapshots_, snapshot, decision);
  per_call->Clear();
  FillPerCallPart(decision, per_call);
  per_call->set_decision_etag(decided.EtagFor(*per_call));
  // The sighting is recorded either way: an unchanged answer is still a
  // device that is alive and runs this decision.
  if (fleet_ != nullptr) fleet_->RecordResolve(request, decided.message, *per_call);
  if (!request.known_decision_etag().empty() &&
      request.known_decision_etag() == per_call->decision_etag()) {
    summary->unchanged = true;
    EncodeUnchangedResponse(decided.message.policy_version(), per_call->resolve_interval_seconds(),
                            per_call->decision_etag(), response_bytes);
    return absl::OkStatus();
  }
  if (fleet_ != nullptr) {
    fleet_->ApplyVerification(decided.message.weight_path().name(), decided.message.hardware_class(),
                              request.profile().cpu_model(), per_call->mutable_weight_path());
  }
  EncodeResolveResponse(decided.encoded, *per_call, response_bytes);

  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("ResolveWeightPath device_id={} class={} path={} model={} policy={}",
                  request.device_id(), decided.message.hardware_class(),
                  decided.message.weight_path().name(), decided.message.model(),
                  decided.message.policy_version());
  }
  return absl::OkStatus();
}

absl::Status WeightPathService::AdmitDevice(const grpc::CallbackServerContext& context,
                                            absl::Status validation,
                                            const std::string& device_id) const {
  RETURN_IF_ERROR(validation);
  if (require_client_identity_) RETURN_IF_ERROR(CheckDeviceIdentity(*context.auth_context(), device_id));
  return absl::OkStatus();
}

void WeightPathService::LogRefused(absl::string_view method, const std::string& device_id,
                                   const absl::Status& status) {
  const bool device_id_valid = ValidateDeviceId(device_id).ok();
  spdlog::warn("{} device_id={} refused: {}: {}", std::string(method),
               device_id_valid ? device_id : std::string("<invalid>"),
               absl::StatusCodeToString(status.code()), std::string(status.message()));
}

grpc::ServerUnaryReactor* WeightPathService::ReportMeasurement(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes) {
  return ServeStoreCall<v1::ReportMeasurementRequest>(
      context, request_bytes, response_bytes, store_executor_,
      [this, context](const v1::ReportMeasurementRequest& request) {
        return LoggedIfRefused("ReportMeasurement", request.device_id(),
                               RecordMeasurement(*context, request));
      },
      [this](const v1::ReportMeasurementRequest& request) {
        return AdmitLoad(DeviceCallMethod::kReportMeasurement, request.device_id(),
                         SteadyNanos(std::chrono::steady_clock::now()));
      });
}

absl::StatusOr<v1::ReportMeasurementResponse> WeightPathService::RecordMeasurement(
    const grpc::CallbackServerContext& context, const v1::ReportMeasurementRequest& request) {
  RETURN_IF_ERROR(AdmitDevice(context, ValidateReport(request), request.device_id()));
  if (fleet_ == nullptr) {
    return absl::FailedPreconditionError(
        "the server runs with --store=none: measurements cannot be recorded");
  }
  return fleet_->ReportMeasurement(request);
}

}  // namespace weightpath::server
