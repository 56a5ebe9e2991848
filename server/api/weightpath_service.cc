#include "server/api/weightpath_service.h"

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/retry_pushback.h"
#include "common/status_macros.h"
#include "server/resolve/profile_memo.h"
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

// WEIGHTPATH_PROFILE_MEMO=off: every resolve takes the full path (decode,
// validate, decide), the control the memo is measured and tested against
// (bench/server_load.sh SERVER_B_ENV). Read once.
bool ProfileMemoOff() {
  static const bool off = [] {
    const char* choice = std::getenv("WEIGHTPATH_PROFILE_MEMO");
    return choice != nullptr && absl::string_view(choice) == "off";
  }();
  return off;
}

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
                                     bool require_client_identity, std::optional<Fleet> fleet,
                                     StoreExecutor* store_executor, DeviceCallLimits* limits,
                                     deploy::ResolveIntervalSettings intervals,
                                     const OperatorAuth* operators)
    : snapshots_(snapshots),
      metrics_(metrics),
      require_client_identity_(require_client_identity),
      fleet_(fleet),
      store_executor_(store_executor),
      limits_(limits != nullptr && limits->enabled() ? limits : nullptr),
      intervals_(intervals),
      operators_(operators) {}

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
  absl::Status status;
  bool shed = false;
  // Its in-flight place is held while the answer is worked out.
  std::optional<absl::StatusOr<DeviceCallLimits::Admission>> admission;
  auto admit = [&](absl::string_view device_id) {
    admission = AdmitLoad(DeviceCallMethod::kResolve, device_id, SteadyNanos(started));
    shed = !admission->ok();
    if (shed) status = admission->status();
    return !shed;
  };
  grpc::Slice contiguous;  // the request's bytes, alive for the whole call
  if (!ResolveRequestBytes(*request_bytes, &contiguous)) {
    scratch.decoder.Reset(&scratch.request);
    scratch.head_only = false;
    status = absl::InvalidArgumentError("request: the message could not be read");
  } else {
    const absl::string_view wire(reinterpret_cast<const char*>(contiguous.begin()),
                                 contiguous.size());
    RequestHead head;
    const RequestHead* plain = DecodeRequestHead(wire, &head) ? &head : nullptr;
    bool answered = false;
    policy::Decision known;
    const SnapshotHolder::Pin snapshot = snapshots_->Current();
    const bool is_known = plain != nullptr && FindKnownDecision(head, *snapshot, &known);
    // A device whose profile the memo knows is admitted as soon as that is
    // known (its request parses); every other request once parsed, as before.
    if (is_known && admit(head.device_id)) {
      answered = AnswerKnown(context, head, wire, known, *snapshot, &scratch, &summary,
                             response_bytes);
    }
    if (!answered && !shed) {
      summary = ResolveSummary();
      status = ParseResolveRequest(wire, &scratch);
      if (status.ok() && (admission.has_value() || admit(scratch.request.device_id()))) {
        status = AnswerResolve(context, scratch.request, plain, &scratch.per_call, &summary,
                               response_bytes);
      }
    }
  }
  if (!status.ok() && !shed) LogRefused("ResolveWeightPath", scratch.request.device_id(), status);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
  metrics_->RecordResolve(summary, static_cast<int>(status.code()), elapsed.count());
  if (status.ok()) {
    reactor->Finish(grpc::Status::OK);  // what FinishCall does for OK, without the conversions
  } else {
    FinishCall(context, reactor, status);
  }
  return reactor;
}

bool WeightPathService::FindKnownDecision(const RequestHead& head, const Snapshot& snapshot,
                                          policy::Decision* decision) const {
  if (ProfileMemoOff()) return false;
  if (fleet_.has_value() && !fleet_->rollouts.ForThisCall()->empty()) return false;
  if (!RequestHeadIsValid(head)) return false;
  const ProfileMemo::Epoch epoch = memo_.EpochFor(*snapshots_, snapshot);
  if (epoch.policy_reads_labels) return false;
  return memo_.Find(head.profile, epoch.id, head.priority, decision);
}

bool WeightPathService::AnswerKnown(grpc::CallbackServerContext* context, const RequestHead& head,
                                    absl::string_view wire, const policy::Decision& decision,
                                    const Snapshot& snapshot, ResolveScratch* scratch,
                                    ResolveSummary* summary, grpc::ByteBuffer* response_bytes) {
  // The request's head passes validation (FindKnownDecision; the etag is
  // checked below) and its profile is one that parsed and passed: what
  // ValidateResolveRequest would say. Identity is still the call's own.
  if (require_client_identity_ &&
      !CheckDeviceIdentity(*context->auth_context(), head.device_id).ok()) {
    return false;
  }
  if (fleet_.has_value()) {
    // The fleet's sighting record and evidence read the whole request.
    if (!KnownDecisionEtagIsValid(head.known_decision_etag) ||
        !ParseResolveRequest(wire, scratch).ok()) {
      return false;
    }
    absl::StatusOr<ResolvedDecision> resolved =
        DecideKnown(decision, scratch->request, snapshot, summary, intervals_);
    // Refusals are the full path's to make and count.
    if (!resolved.ok() ||
        !CheckAgentTakesBuild(*resolved, scratch->request.accepts_directory_builds()).ok()) {
      return false;
    }
    AnswerDecided(scratch->request, snapshot, *resolved, &scratch->per_call, summary,
                  response_bytes, head.profile);
    return true;
  }
  // A path deriving engine arguments reads the whole profile, which only
  // the full path decodes.
  if (policy::DerivesEngineArgs(*decision.path)) return false;
  // Nothing per call changes the answer: both are the decided part's own,
  // found by the decision and the model once this thread has seen them.
  DecidedPartCache& parts = ThreadDecidedPartCache();
  const DecidedPart* decided = parts.FindKnown(snapshot, decision, head.model);
  if (decided != nullptr) {
    if (!head.accepts_directory_builds && decided->message.artifact().files_size() > 0) {
      return false;  // refused on the full path
    }
    Summarize(decision, summary);
  } else {
    FillRequestHead(head, scratch);
    absl::StatusOr<ResolvedDecision> resolved =
        DecideKnown(decision, scratch->request, snapshot, summary, intervals_);
    if (!resolved.ok() || !CheckAgentTakesBuild(*resolved, head.accepts_directory_builds).ok()) {
      return false;
    }
    decided = &parts.Find(*snapshots_, snapshot, *resolved);
    decided->PlainAnswersFor(*resolved);
    parts.RememberKnown(snapshot, decision, head.model, *decided);
  }
  const PlainAnswers& answers = decided->plain;
  if (!head.known_decision_etag.empty() && head.known_decision_etag == decided->decision_etag) {
    // The decision's own etag is a valid one.
    summary->unchanged = true;
    *response_bytes = answers.unchanged;  // shares the slice
    return true;
  }
  if (!KnownDecisionEtagIsValid(head.known_decision_etag)) return false;
  *response_bytes = answers.full;
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("ResolveWeightPath device_id={} class={} path={} model={} policy={}",
                  std::string_view(head.device_id.data(), head.device_id.size()),
                  decided->message.hardware_class(), decided->message.weight_path().name(),
                  decided->message.model(), decided->message.policy_version());
  }
  return true;
}

absl::Status WeightPathService::AnswerResolve(grpc::CallbackServerContext* context,
                                              const v1::ResolveWeightPathRequest& request,
                                              const RequestHead* head,
                                              v1::ResolveWeightPathResponse* per_call,
                                              ResolveSummary* summary,
                                              grpc::ByteBuffer* response_bytes) {
  const absl::StatusOr<policy::HardwareClass> hardware_class =
      ValidateAndClassifyResolveRequest(request);
  RETURN_IF_ERROR(
      AdmitDevice(*context, hardware_class.status(), request.device_id(), request.dry_run()));
  // Both stay valid for the whole call; a refresh or reload publishes new ones.
  const Published<RolloutCache::Rollouts>::Pin rollouts =
      fleet_.has_value() ? fleet_->rollouts.ForThisCall()
                         : Published<RolloutCache::Rollouts>::Pin::Of(kNoRollouts);
  const SnapshotHolder::Pin snapshot = snapshots_->Current();
  ASSIGN_OR_RETURN(const ResolvedDecision decision,
                   Decide(request, *hardware_class, *snapshot, summary, *rollouts, intervals_));
  RETURN_IF_ERROR(CheckAgentTakesBuild(decision, request.accepts_directory_builds()));
  AnswerDecided(request, *snapshot, decision, per_call, summary, response_bytes,
                head != nullptr ? head->profile : absl::string_view());
  if (head != nullptr) RememberProfile(request, *head, *hardware_class, *snapshot, *rollouts);
  return absl::OkStatus();
}

void WeightPathService::AnswerDecided(const v1::ResolveWeightPathRequest& request,
                                      const Snapshot& snapshot, const ResolvedDecision& decision,
                                      v1::ResolveWeightPathResponse* per_call,
                                      ResolveSummary* summary, grpc::ByteBuffer* response_bytes,
                                      absl::string_view profile_wire) {
  const DecidedPart& decided = ThreadDecidedPartCache().Find(*snapshots_, snapshot, decision);
  per_call->Clear();
  FillPerCallPart(decision, per_call);
  per_call->set_decision_etag(decided.EtagFor(*per_call));
  // The sighting is recorded either way: an unchanged answer is still a
  // device that is alive and runs this decision. A dry run is an operator
  // trying a profile, not a device: its answer is the same to the byte, but
  // the registry (ListDevices, FleetSummary, the devices-seen gauge) never
  // hears of it. Its resolve is still counted in the resolve metrics, whose
  // labels name no device, since the server did the same work for it; and
  // it is charged to its id's rate limit like any call, so dry_run cannot
  // lift a device's limit (the limiter's memory is fixed either way).
  if (fleet_.has_value() && !request.dry_run()) {
    fleet_->state.RecordResolve(request, decided.message, *per_call,
                                std::string_view(profile_wire.data(), profile_wire.size()));
  }
  if (!request.known_decision_etag().empty() &&
      request.known_decision_etag() == per_call->decision_etag()) {
    summary->unchanged = true;
    EncodeUnchangedResponse(decided.message.policy_version(), per_call->resolve_interval_seconds(),
                            per_call->decision_etag(), response_bytes);
    return;
  }
  if (fleet_.has_value()) {
    fleet_->state.ApplyVerification(decided.message.weight_path().name(), decided.message.hardware_class(),
                              request.profile().cpu_model(), per_call->mutable_weight_path());
  }
  EncodeResolveResponse(decided.encoded, *per_call, response_bytes);

  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("ResolveWeightPath device_id={} class={} path={} model={} policy={}",
                  request.device_id(), decided.message.hardware_class(),
                  decided.message.weight_path().name(), decided.message.model(),
                  decided.message.policy_version());
  }
}

void WeightPathService::RememberProfile(const v1::ResolveWeightPathRequest& request,
                                        const RequestHead& head,
                                        policy::HardwareClass hardware_class,
                                        const Snapshot& snapshot,
                                        const std::vector<v1::Rollout>& rollouts) {
  // Only what FindKnownDecision would look up: no rollouts, a policy that
  // reads no labels, a head that passes validation (it did: the call was
  // answered), a profile of a size the memo keeps.
  if (ProfileMemoOff() || !rollouts.empty() || head.profile.size() > ProfileMemo::kMaxProfileBytes) {
    return;
  }
  const ProfileMemo::Epoch epoch = memo_.EpochFor(*snapshots_, snapshot);
  if (epoch.id == 0 || epoch.policy_reads_labels) return;
  // The policy's decision at both effective priorities, as Decide makes it
  // when no rollout applies (deploy::ResolveWithRollouts: Evaluate).
  absl::StatusOr<policy::Decision> speed = policy::Evaluate(
      *snapshot.policy, hardware_class, request.profile(), v1::PRIORITY_SPEED, request.labels());
  absl::StatusOr<policy::Decision> fidelity = policy::Evaluate(
      *snapshot.policy, hardware_class, request.profile(), v1::PRIORITY_FIDELITY, request.labels());
  if (!speed.ok() || !fidelity.ok()) return;
  memo_.Remember(head.profile, epoch.id, *speed, *fidelity);
}

absl::Status WeightPathService::AdmitDevice(const grpc::CallbackServerContext& context,
                                            absl::Status validation,
                                            const std::string& device_id, bool dry_run) const {
  RETURN_IF_ERROR(validation);
  if (!require_client_identity_) return absl::OkStatus();
  absl::Status identity = CheckDeviceIdentity(*context.auth_context(), device_id);
  if (identity.ok() || !dry_run) return identity;
  // Only once the device identity failed: a device's own call never pays
  // for the operator check.
  if (operators_ != nullptr && operators_->Authenticate(context).ok()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      identity.message(), "; a dry run is also answered for an operator certificate"));
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
      CountedAs{metrics_, "WeightPath/ReportMeasurement"}, context, request_bytes, response_bytes, store_executor_,
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
  if (!fleet_.has_value()) {
    return absl::FailedPreconditionError(
        "the server runs with --store=none: measurements cannot be recorded");
  }
  return fleet_->state.ReportMeasurement(request);
}

}  // namespace weightpath::server
