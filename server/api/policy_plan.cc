#include "server/api/policy_plan.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/field_violation.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "deploy/rollout_shaping.h"
#include "deploy/rollout_validation.h"
#include "server/api/rollout_explain.h"
#include "server/resolve/request_validation.h"
#include "store/call_deadline.h"

namespace weightpath::server {
namespace {

// (hardware class, from, to, refusal): one row of the plan.
using MoveKey = std::tuple<std::string, std::string, std::string, std::string>;

struct MoveCount {
  uint64_t devices = 0;
  std::vector<std::string> examples;
};

absl::Status CheckExamples(uint32_t examples);

absl::Status CheckRequest(const v1::PlanPolicyRequest& request) {
  if (request.policy_yaml().empty()) {
    return InvalidArgumentForField("policy_yaml", "policy_yaml: the candidate policy document is empty");
  }
  if (request.source_name().size() > kMaxPlanSourceNameBytes) {
    return InvalidArgumentForField(
        "source_name", absl::StrCat("source_name: ", request.source_name().size(),
                                    " bytes; at most ", kMaxPlanSourceNameBytes));
  }
  for (unsigned char c : request.source_name()) {
    if (c < 0x20 || c == 0x7f) {
      return InvalidArgumentForField("source_name", "source_name: holds a control character");
    }
  }
  return CheckExamples(request.examples());
}


// Where a side sends the device: the build's name, and a pinned artifact's
// version (or digest) when a rollout pins one.
std::string Destination(const deploy::RolloutResolution& resolution) {
  std::string name = resolution.decision.path->name;
  if (resolution.pinned_artifact.has_value()) {
    const v1::Artifact& artifact = *resolution.pinned_artifact;
    absl::StrAppend(&name, " (pinned ",
                    !artifact.version().empty() ? artifact.version()
                                                : artifact.sha256().substr(0, 12),
                    ")");
  }
  return name;
}

absl::StatusOr<deploy::RolloutResolution> Resolve(const PlanSide& side,
                                                  policy::HardwareClass hardware_class,
                                                  const v1::ResolveWeightPathRequest& asked,
                                                  const std::string& device_id) {
  return deploy::ResolveWithRollouts(*side.policy, hardware_class, asked.profile(),
                                     asked.priority(), asked.labels(), device_id, side.rollouts);
}

void WriteMoves(const std::map<MoveKey, MoveCount>& moves, v1::PlanPolicyResponse* response) {
  std::vector<std::pair<MoveKey, MoveCount>> sorted(moves.begin(), moves.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.devices > b.second.devices;
  });
  for (auto& [key, count] : sorted) {
    v1::PlanPolicyResponse::Move* move = response->add_moves();
    move->set_hardware_class(std::get<0>(key));
    move->set_from_path(std::get<1>(key));
    move->set_to_path(std::get<2>(key));
    move->set_reason(std::get<3>(key));
    move->set_devices(count.devices);
    for (std::string& id : count.examples) move->add_example_device_ids(std::move(id));
  }
}

absl::Status CheckExamples(uint32_t examples) {
  if (examples > kMaxPlanExamples) {
    return InvalidArgumentForField(
        "examples", absl::StrCat("examples: ", examples, "; at most ", kMaxPlanExamples));
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t DevicesMoved(const v1::PlanPolicyResponse& plan) {
  uint64_t moved = 0;
  for (const v1::PlanPolicyResponse::Move& move : plan.moves()) moved += move.devices();
  return moved;
}

absl::StatusOr<std::vector<v1::PlanPolicyResponse>> PlanDecisions(
    const PlanSide& before, const std::vector<PlanSide>& after, const PlanScope& scope,
    store::FleetStore& store, absl::Time now) {
  std::vector<v1::PlanPolicyResponse> responses(after.size());
  std::vector<std::map<MoveKey, MoveCount>> moves(after.size());
  store::DeviceQuery query;
  query.with_profiles = true;
  query.page_size = store::kMaxPageSize;
  if (scope.seen_since.has_value()) query.seen_since = *scope.seen_since;
  uint64_t without_profile = 0;
  uint64_t evaluated = 0;
  while (true) {
    ASSIGN_OR_RETURN(store::DevicePage page, store.ListDevices(query));
    for (const v1::Device& device : page.devices) {
      if (!device.has_hardware_profile()) {
        ++without_profile;
        continue;
      }
      const v1::ResolveWeightPathRequest asked = RequestFromRegistry(device);
      // What the server would accept from the device today.
      absl::StatusOr<policy::HardwareClass> hardware_class =
          ValidateAndClassifyResolveRequest(asked);
      absl::StatusOr<deploy::RolloutResolution> from =
          hardware_class.ok() ? Resolve(before, *hardware_class, asked, device.device_id())
                              : absl::StatusOr<deploy::RolloutResolution>(hardware_class.status());
      if (!from.ok()) {
        ++without_profile;
        continue;
      }
      ++evaluated;
      const std::string from_path = Destination(*from);
      for (size_t i = 0; i < after.size(); ++i) {
        absl::StatusOr<deploy::RolloutResolution> to =
            Resolve(after[i], *hardware_class, asked, device.device_id());
        const std::string to_path = to.ok() ? Destination(*to) : std::string();
        if (to.ok() && to_path == from_path) {
          responses[i].set_devices_unchanged(responses[i].devices_unchanged() + 1);
          continue;
        }
        MoveCount& count =
            moves[i][{std::string(policy::HardwareClassName(*hardware_class)), from_path, to_path,
                      to.ok() ? std::string() : std::string(to.status().message())}];
        ++count.devices;
        if (count.examples.size() < scope.examples) count.examples.push_back(device.device_id());
      }
    }
    if (page.next_page_token.empty()) break;
    // A pass over a large registry may outlast its caller: stop at the
    // call's deadline rather than hold an operator store worker for nothing.
    if (absl::Now() > store::CallDeadline()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the registry pass ran out of the call's deadline after ", evaluated + without_profile,
          " devices; call again with a longer deadline, or narrow it to devices seen lately"));
    }
    query.page_token = page.next_page_token;
  }
  for (size_t i = 0; i < after.size(); ++i) {
    responses[i].set_devices_evaluated(evaluated);
    responses[i].set_devices_without_profile(without_profile);
    WriteMoves(moves[i], &responses[i]);
    *responses[i].mutable_evaluated_at() = ToProtoTime(now);
  }
  return responses;
}

absl::StatusOr<v1::PlanPolicyResponse> PlanPolicy(const v1::PlanPolicyRequest& request,
                                                  const policy::Policy& current,
                                                  store::FleetStore& store, absl::Time now) {
  RETURN_IF_ERROR(CheckRequest(request));
  const std::string source =
      request.source_name().empty() ? std::string("request") : request.source_name();
  absl::StatusOr<std::shared_ptr<const policy::Policy>> candidate =
      policy::LoadPolicy(request.policy_yaml(), source);
  if (!candidate.ok()) {
    return InvalidArgumentForField("policy_yaml",
                                   absl::StrCat("policy_yaml: ", candidate.status().message()));
  }
  PlanScope scope;
  scope.examples = request.examples() == 0 ? kDefaultPlanExamples : request.examples();
  if (request.has_seen_since()) scope.seen_since = FromProtoTime(request.seen_since());
  // Rollouts left out on both sides: the policy's own change.
  ASSIGN_OR_RETURN(std::vector<v1::PlanPolicyResponse> plans,
                   PlanDecisions(PlanSide{&current, {}}, {PlanSide{candidate->get(), {}}}, scope,
                                 store, now));
  v1::PlanPolicyResponse response = std::move(plans.front());
  response.set_current_policy_version(current.version());
  response.set_planned_policy_version((*candidate)->version());
  return response;
}

absl::StatusOr<v1::PlanRolloutResponse> PlanRollout(const v1::PlanRolloutRequest& request,
                                                    const policy::Policy& current,
                                                    const std::vector<v1::Rollout>& rollouts,
                                                    store::FleetStore& store, absl::Time now) {
  RETURN_IF_ERROR(CheckExamples(request.examples()));
  const v1::Rollout& spec = request.rollout();
  if (spec.id().empty()) {
    return InvalidArgumentForField("rollout.id", "rollout.id: must name a rollout");
  }
  PlanScope scope;
  scope.examples = request.examples() == 0 ? kDefaultPlanExamples : request.examples();
  if (request.has_seen_since()) scope.seen_since = FromProtoTime(request.seen_since());

  const v1::Rollout* existing = nullptr;
  std::vector<v1::Rollout> others;
  for (const v1::Rollout& rollout : rollouts) {
    if (rollout.id() == spec.id()) {
      existing = &rollout;
    } else {
      others.push_back(rollout);
    }
  }
  v1::PlanRolloutResponse response;
  response.set_exists(existing != nullptr);
  if (existing != nullptr) {
    response.set_state(existing->state());
    response.set_stage(existing->current_stage());
  }
  const PlanSide before{&current, rollouts};
  auto versioned = [&current](v1::PlanPolicyResponse plan) {
    plan.set_current_policy_version(current.version());
    plan.set_planned_policy_version(current.version());
    return plan;
  };

  if (request.deletion()) {
    if (existing == nullptr) {
      return WithViolatedField(
          absl::NotFoundError(absl::StrCat("rollout.id: '", spec.id(), "' names no rollout")),
          "rollout.id");
    }
    response.set_stages(existing->stages_size());
    ASSIGN_OR_RETURN(std::vector<v1::PlanPolicyResponse> plans,
                     PlanDecisions(before, {PlanSide{&current, others}}, scope, store, now));
    *response.mutable_on_delete() = versioned(std::move(plans.front()));
    return response;
  }

  RETURN_IF_ERROR(deploy::RequireSpecOnly(spec));
  RETURN_IF_ERROR(deploy::ValidateRollout(spec, current));
  // The rollout as CreateRollout or UpdateRollout would store it, so an
  // update they refuse is refused here with the same words.
  ASSIGN_OR_RETURN(v1::Rollout candidate,
                   existing != nullptr ? deploy::UpdateRolloutSpec(*existing, spec, current)
                                       : deploy::StartRollout(spec, current, now));
  response.set_stages(candidate.stages_size());
  v1::Rollout complete = candidate;
  complete.set_state(v1::ROLLOUT_STATE_COMPLETED);
  PlanSide at_stage{&current, others};
  at_stage.rollouts.push_back(std::move(candidate));
  PlanSide when_complete{&current, others};
  when_complete.rollouts.push_back(std::move(complete));
  ASSIGN_OR_RETURN(std::vector<v1::PlanPolicyResponse> plans,
                   PlanDecisions(before, {std::move(at_stage), std::move(when_complete)}, scope,
                                 store, now));
  *response.mutable_at_stage() = versioned(std::move(plans[0]));
  *response.mutable_when_complete() = versioned(std::move(plans[1]));
  return response;
}

}  // namespace weightpath::server
