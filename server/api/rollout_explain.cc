#include "server/api/rollout_explain.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/field_violation.h"
#include "common/proto_time.h"
#include "policy/policy.h"
#include "server/api/path_candidates.h"
#include "server/resolve/request_validation.h"
#include "server/resolve/resolver.h"

namespace weightpath::server {

v1::ResolveWeightPathRequest RequestFromRegistry(const v1::Device& device) {
  v1::ResolveWeightPathRequest request;
  request.set_device_id(device.device_id());
  *request.mutable_labels() = device.labels();
  request.set_model(device.model());
  request.set_agent_version(device.agent_version());
  if (device.requested_priority() != v1::PRIORITY_UNSPECIFIED) {
    request.set_priority(device.requested_priority());
  } else {
    // A record from before the ask was kept has only the priority the
    // device ended up with. When a rollout shaped it, that is the rollout's
    // doing, not the device's ask, so the default is assumed.
    request.set_priority(device.rollout_id().empty() ? device.effective_priority()
                                                     : v1::PRIORITY_SPEED);
    if (request.priority() == v1::PRIORITY_UNSPECIFIED) request.set_priority(v1::PRIORITY_SPEED);
  }
  if (device.has_hardware_profile()) {
    *request.mutable_profile() = device.hardware_profile();
    return request;
  }
  v1::HardwareProfile* profile = request.mutable_profile();
  profile->set_arch(device.profile().arch());
  profile->set_cpu_model(device.profile().cpu_model());
  *profile->mutable_cpu_flags() = device.profile().cpu_flags();
  profile->set_accelerator(device.profile().accelerator().empty() ? "none"
                                                                 : device.profile().accelerator());
  profile->set_source(absl::StrCat("registry:", device.device_id()));
  return request;
}

namespace {

// The rollout that shaped the decision as GetRollout returns it: read from
// the store for the reconciler's latest counts and gate readings, else (no
// store, or it is down: the explanation goes on) the copy the decision was
// shaped with.
void FillRolloutDetail(const std::string& rollout_id, const std::vector<v1::Rollout>& rollouts,
                       store::FleetStore* store, v1::Rollout* detail) {
  if (store != nullptr) {
    absl::StatusOr<store::StoredRollout> stored = store->GetRollout(rollout_id);
    if (stored.ok()) {
      *detail = std::move(stored->rollout);
      return;
    }
  }
  for (const v1::Rollout& rollout : rollouts) {
    if (rollout.id() == rollout_id) *detail = rollout;
  }
}

}  // namespace

absl::StatusOr<v1::ExplainDecisionResponse> ExplainDecision(const v1::ExplainDecisionRequest& request,
                                                            const ExplainContext& context) {
  v1::ResolveWeightPathRequest subject;
  std::vector<std::string> notes;
  switch (request.subject_case()) {
    case v1::ExplainDecisionRequest::kDeviceId: {
      if (absl::Status valid = ValidateDeviceId(request.device_id()); !valid.ok()) return valid;
      if (context.store == nullptr) {
        return absl::FailedPreconditionError(
            "device_id: the server runs without a fleet store (--store), so it knows no devices; "
            "send the full request instead");
      }
      absl::StatusOr<v1::Device> device = context.store->GetDevice(request.device_id());
      if (!device.ok()) return device.status();
      subject = RequestFromRegistry(*device);
      if (device->has_hardware_profile()) {
        notes.push_back(absl::StrCat(
            "note: evaluated on the hardware profile, priority and labels the device sent",
            device->has_profile_recorded_at()
                ? absl::StrCat(" (profile stored ",
                               absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                                                FromProtoTime(device->profile_recorded_at()),
                                                absl::UTCTimeZone()),
                               ")")
                : std::string()));
        // A valid profile when it was sent may not be under today's limits.
        if (absl::Status valid = ValidateResolveRequest(subject); !valid.ok()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "device_id: the profile the device last sent no longer passes validation: ",
              valid.message()));
        }
      } else {
        notes.push_back(
            "note: the registry holds no profile from this device (not seen since profiles were "
            "kept), only a summary (arch, CPU model, flags, accelerator); the decision is "
            "re-evaluated from that summary, and rules reading other profile fields (memory, GPU "
            "details, supports_bf16) may differ from the device's own resolve");
      }
      if (device->requested_priority() == v1::PRIORITY_UNSPECIFIED &&
          !device->rollout_id().empty()) {
        notes.push_back(absl::StrCat("note: the registry shows rollout '", device->rollout_id(),
                                     "' shaped its last decision; priority assumed SPEED as asked"));
      }
      break;
    }
    case v1::ExplainDecisionRequest::kRequest:
      subject = request.request();
      if (absl::Status valid = ValidateResolveRequest(subject); !valid.ok()) {
        absl::Status prefixed(valid.code(), absl::StrCat("request.", valid.message()));
        const std::optional<std::string> field = ViolatedField(valid);
        return field.has_value() ? WithViolatedField(std::move(prefixed), absl::StrCat("request.", *field))
                                 : prefixed;
      }
      break;
    case v1::ExplainDecisionRequest::SUBJECT_NOT_SET:
      return InvalidArgumentForField("subject", "subject: set device_id or request");
  }

  static const std::vector<v1::Rollout> kNoRollouts;
  const std::vector<v1::Rollout>& rollouts =
      context.rollouts != nullptr ? *context.rollouts : kNoRollouts;
  v1::ExplainDecisionResponse response;
  ResolveSummary summary;
  std::vector<std::string> considered;
  absl::Status resolved =
      Resolve(subject, *context.snapshot, response.mutable_decision(), &summary, rollouts, &considered);
  if (!resolved.ok()) return resolved;
  if (context.apply_verification) context.apply_verification(subject, response.mutable_decision());

  const policy::Policy& policy = *context.snapshot->policy;
  for (std::string& note : notes) response.add_rule_trace(std::move(note));
  // The trace follows the priority the decision was evaluated with, so a
  // rollout's set_priority shows up as the rules it makes match.
  for (std::string& line : policy::TraceRules(policy, subject.profile(),
                                              response.decision().effective_priority(),
                                              subject.labels())) {
    response.add_rule_trace(std::move(line));
  }
  *response.mutable_rollout() = response.decision().rollout();
  if (!response.rollout().rollout_id().empty()) {
    FillRolloutDetail(response.rollout().rollout_id(), rollouts, context.store,
                      response.mutable_rollout_detail());
  }
  for (std::string& line : considered) response.add_rollouts_considered(std::move(line));
  *response.mutable_verification() = response.decision().weight_path().verification();
  response.set_policy_version(policy.version());
  *response.mutable_evaluated_at() = ToProtoTime(context.now);
  *response.mutable_evaluated() = subject;

  std::optional<absl::StatusOr<v1::GetVerificationMatrixResponse>> matrix;
  if (context.verification_matrix) matrix = context.verification_matrix();
  if (absl::Status judged =
          FillPathCandidates(policy, subject, response.decision().hardware_class(),
                             context.snapshot->catalog->FindModelFacts(response.decision().model()),
                             matrix.has_value() ? &*matrix : nullptr, response.mutable_paths());
      !judged.ok()) {
    return judged;
  }
  return response;
}

}  // namespace weightpath::server
