#include "deploy/rollout_shaping.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/proto_time.h"
#include "deploy/rollout_bucket.h"
#include "deploy/stage_text.h"

namespace weightpath::deploy {
namespace {

absl::string_view StateName(v1::RolloutState state) {
  return v1::RolloutState_Name(state);
}

// True when some rule of the policy hands `path_id` to this hardware class:
// the policy is the only record of which builds a class can run.
bool PolicyRoutesPathToClass(const policy::Policy& policy, absl::string_view path_id,
                             policy::HardwareClass hardware_class) {
  for (const policy::Rule& rule : policy.rules()) {
    if (rule.path_id != path_id) continue;
    const auto& classes = rule.match.hardware_classes;
    if (classes.empty() ||
        std::find(classes.begin(), classes.end(), hardware_class) != classes.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool ShapesDecisions(const v1::Rollout& rollout) {
  switch (rollout.state()) {
    case v1::ROLLOUT_STATE_PROGRESSING:
    case v1::ROLLOUT_STATE_PAUSED:
    case v1::ROLLOUT_STATE_COMPLETED:
      return true;
    default:
      return false;
  }
}

uint32_t MembershipPercent(const v1::Rollout& rollout) {
  if (!ShapesDecisions(rollout)) return 0;
  if (rollout.state() == v1::ROLLOUT_STATE_COMPLETED) return 100;
  if (rollout.stages().empty()) return 0;
  uint32_t stage = std::min<uint32_t>(rollout.current_stage(), rollout.stages_size() - 1);
  return std::min<uint32_t>(rollout.stages(stage).percent(), 100);
}

uint32_t StageThatAdmits(const v1::Rollout& rollout, uint32_t bucket) {
  for (int i = 0; i < rollout.stages_size(); ++i) {
    if (BucketWithinPercent(bucket, rollout.stages(i).percent())) return i;
  }
  return rollout.stages_size();
}

bool IsMember(const v1::Rollout& rollout, absl::string_view device_id, const Labels& labels,
              policy::HardwareClass hardware_class) {
  uint32_t percent = MembershipPercent(rollout);
  if (percent == 0 || !Matches(rollout.selector(), labels, hardware_class)) return false;
  return BucketWithinPercent(RolloutBucket(rollout.id(), device_id), percent);
}

RolloutEffect EffectOf(const v1::RolloutAction& action) {
  RolloutEffect effect;
  switch (action.action_case()) {
    case v1::RolloutAction::kSetPriority:
      effect.priority = action.set_priority();
      break;
    case v1::RolloutAction::kPinPath:
      effect.path_id = action.pin_path();
      break;
    case v1::RolloutAction::kPinArtifact:
      effect.artifact = action.pin_artifact();
      break;
    case v1::RolloutAction::ACTION_NOT_SET:
      break;
  }
  return effect;
}

bool PrecedesInRanking(const v1::Rollout& a, const v1::Rollout& b) {
  if (a.precedence() != b.precedence()) return a.precedence() > b.precedence();
  absl::Time a_created = FromProtoTime(a.created_at());
  absl::Time b_created = FromProtoTime(b.created_at());
  if (a_created != b_created) return a_created < b_created;
  return a.id() < b.id();
}

RolloutRanking RankRollouts(const std::vector<v1::Rollout>& rollouts, absl::string_view device_id,
                            const Labels& labels, policy::HardwareClass hardware_class) {
  std::vector<const v1::Rollout*> ordered;
  ordered.reserve(rollouts.size());
  for (const v1::Rollout& rollout : rollouts) ordered.push_back(&rollout);
  std::sort(ordered.begin(), ordered.end(), [](const v1::Rollout* a, const v1::Rollout* b) {
    return PrecedesInRanking(*a, *b);
  });

  RolloutRanking ranking;
  for (const v1::Rollout* rollout : ordered) {
    std::string head = absl::StrCat(rollout->id(), " (precedence ", rollout->precedence(), ", ",
                                     StateName(rollout->state()), "): ");
    if (!ShapesDecisions(*rollout)) {
      ranking.considered.push_back(absl::StrCat(head, "shapes nothing in this state"));
      continue;
    }
    if (!Matches(rollout->selector(), labels, hardware_class)) {
      ranking.considered.push_back(absl::StrCat(head, "selector does not match"));
      continue;
    }
    uint32_t bucket = RolloutBucket(rollout->id(), device_id);
    uint32_t percent = MembershipPercent(*rollout);
    if (!BucketWithinPercent(bucket, percent)) {
      ranking.considered.push_back(absl::StrCat(
          head, "bucket ", bucket, " is outside ", percent, "% (",
          StageOf(rollout->current_stage(), rollout->stages_size()), ")"));
      continue;
    }
    ranking.considered.push_back(absl::StrCat(
        head, "member, bucket ", bucket, " within ", percent, "% (",
        StageOf(rollout->current_stage(), rollout->stages_size()), ")"));
    RolloutCandidate candidate;
    candidate.rollout = rollout;
    candidate.attribution.set_rollout_id(rollout->id());
    candidate.attribution.set_bucket(bucket);
    candidate.attribution.set_stage(rollout->current_stage());
    candidate.effect = EffectOf(rollout->action());
    ranking.candidates.push_back(std::move(candidate));
  }
  return ranking;
}

ShapedRequest ShapeDecision(const std::vector<v1::Rollout>& rollouts, absl::string_view device_id,
                            const Labels& labels, policy::HardwareClass hardware_class,
                            v1::Priority base_priority) {
  RolloutRanking ranking = RankRollouts(rollouts, device_id, labels, hardware_class);
  ShapedRequest shaped;
  shaped.effective_priority =
      base_priority == v1::PRIORITY_UNSPECIFIED ? v1::PRIORITY_SPEED : base_priority;
  shaped.considered = std::move(ranking.considered);
  if (!ranking.candidates.empty()) {
    shaped.shaped_by = std::move(ranking.candidates.front());
    if (shaped.shaped_by->effect.priority.has_value()) {
      shaped.effective_priority = *shaped.shaped_by->effect.priority;
    }
  }
  return shaped;
}

absl::StatusOr<RolloutResolution> ResolveWithRollouts(const policy::Policy& policy,
                                                      const v1::HardwareProfile& profile,
                                                      v1::Priority requested_priority,
                                                      const Labels& labels,
                                                      absl::string_view device_id,
                                                      const std::vector<v1::Rollout>& rollouts) {
  ASSIGN_OR_RETURN(policy::HardwareClass hardware_class, policy::ClassifyHardware(profile));
  return ResolveWithRollouts(policy, hardware_class, profile, requested_priority, labels,
                             device_id, rollouts);
}

absl::StatusOr<RolloutResolution> ResolveWithRollouts(const policy::Policy& policy,
                                                      policy::HardwareClass hardware_class,
                                                      const v1::HardwareProfile& profile,
                                                      v1::Priority requested_priority,
                                                      const Labels& labels,
                                                      absl::string_view device_id,
                                                      const std::vector<v1::Rollout>& rollouts) {
  ASSIGN_OR_RETURN(policy::Decision base,
                   policy::Evaluate(policy, hardware_class, profile, requested_priority, labels));
  RolloutRanking ranking = RankRollouts(rollouts, device_id, labels, hardware_class);

  RolloutResolution resolution;
  resolution.decision = base;
  resolution.considered = std::move(ranking.considered);
  for (const RolloutCandidate& candidate : ranking.candidates) {
    const RolloutEffect& effect = candidate.effect;
    std::string skipped_head = absl::StrCat(candidate.rollout->id(), ": skipped, ");
    if (effect.priority.has_value()) {
      ASSIGN_OR_RETURN(resolution.decision,
                       policy::Evaluate(policy, hardware_class, profile, *effect.priority,
                                        labels));
    } else if (effect.path_id.has_value()) {
      const policy::PathDefinition* path = policy.FindPath(*effect.path_id);
      if (path == nullptr) {
        resolution.considered.push_back(
            absl::StrCat(skipped_head, "pinned path '", *effect.path_id, "' is not in policy ",
                         policy.version()));
        continue;
      }
      if (!PolicyRoutesPathToClass(policy, *effect.path_id, hardware_class)) {
        resolution.considered.push_back(
            absl::StrCat(skipped_head, "no policy rule gives path '", *effect.path_id, "' to ",
                         std::string(policy::HardwareClassName(hardware_class))));
        continue;
      }
      resolution.decision.path = path;
    } else if (effect.artifact.has_value()) {
      if (base.path == nullptr || base.path->name != effect.artifact->path()) {
        resolution.considered.push_back(absl::StrCat(
            skipped_head, "the device's path is '", base.path == nullptr ? "" : base.path->name,
            "', not the pinned '", effect.artifact->path(), "'"));
        continue;
      }
      resolution.pinned_artifact = effect.artifact->artifact();
    } else {
      resolution.considered.push_back(absl::StrCat(skipped_head, "it has no action"));
      continue;
    }
    resolution.attribution = candidate.attribution;
    resolution.considered.push_back(
        absl::StrCat(candidate.rollout->id(), ": shaped the decision"));
    return resolution;
  }
  return resolution;
}

}  // namespace weightpath::deploy
