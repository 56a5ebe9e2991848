// Which rollout, if any, shapes one device's decision, and what it changes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "deploy/label_selector.h"
#include "policy/policy.h"
#include "weightpath/v1/rollout.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::deploy {

// PROGRESSING, PAUSED and COMPLETED rollouts shape decisions; ABORTED and
// ROLLED_BACK ones shape nothing, so their members fall back to the plain
// policy decision at their next resolve.
bool ShapesDecisions(const v1::Rollout& rollout);

// The percent of the selector a rollout reaches now: the current stage's
// percent while PROGRESSING or PAUSED (a pause freezes it, so nobody new is
// brought in by a stage change), 100 once COMPLETED, 0 when it shapes nothing.
uint32_t MembershipPercent(const v1::Rollout& rollout);

// The first stage whose percent covers `bucket`: the stage that brought a
// member in. stages_size() when no stage covers it (cannot happen for a
// valid rollout, whose last stage is 100%).
uint32_t StageThatAdmits(const v1::Rollout& rollout, uint32_t bucket);

// True when the device matches the selector and its bucket is within the
// rollout's membership percent.
bool IsMember(const v1::Rollout& rollout, absl::string_view device_id, const Labels& labels,
              policy::HardwareClass hardware_class);

// What a rollout changes for its members; exactly one field is set.
struct RolloutEffect {
  std::optional<v1::Priority> priority;
  std::optional<std::string> path_id;
  std::optional<v1::PinnedArtifact> artifact;
};

RolloutEffect EffectOf(const v1::RolloutAction& action);

struct RolloutCandidate {
  const v1::Rollout* rollout = nullptr;  // points into the caller's vector
  v1::RolloutAttribution attribution;    // id, bucket, the rollout's current stage
  RolloutEffect effect;
};

struct RolloutRanking {
  // Rollouts in which the device is a member, in precedence order.
  std::vector<RolloutCandidate> candidates;
  // One line per rollout looked at, in precedence order, saying why it does
  // or does not include the device (for ExplainDecision).
  std::vector<std::string> considered;
};

// Precedence: higher `precedence` first, then earlier `created_at`, then the
// smaller id, so the order never depends on how the rollouts were listed.
bool PrecedesInRanking(const v1::Rollout& a, const v1::Rollout& b);

RolloutRanking RankRollouts(const std::vector<v1::Rollout>& rollouts, absl::string_view device_id,
                            const Labels& labels, policy::HardwareClass hardware_class);

struct ShapedRequest {
  std::optional<RolloutCandidate> shaped_by;  // unset: no rollout applies
  v1::Priority effective_priority = v1::PRIORITY_SPEED;
  std::vector<std::string> considered;
};

// The first member rollout by precedence, and the priority the policy should
// be evaluated with (`base_priority`, or the rollout's set_priority). Path
// and artifact pins are left to ResolveWithRollouts, which knows the policy.
ShapedRequest ShapeDecision(const std::vector<v1::Rollout>& rollouts, absl::string_view device_id,
                            const Labels& labels, policy::HardwareClass hardware_class,
                            v1::Priority base_priority);

struct RolloutResolution {
  policy::Decision decision;
  // Empty rollout_id when no rollout shaped the decision.
  v1::RolloutAttribution attribution;
  // Set when a pin_artifact rollout applies: serve this instead of the
  // catalog's artifact for decision.path.
  std::optional<v1::Artifact> pinned_artifact;
  std::vector<std::string> considered;
};

// The whole decision for one device: the policy evaluated with the requested
// priority, then shaped by the first member rollout that can apply:
//  - set_priority: the policy re-evaluated with that priority;
//  - pin_path: that path, but only where some policy rule gives it to the
//    device's hardware class (a pin never puts an x86 build on an ARM board);
//    the rule that would have matched stays in decision.rule;
//  - pin_artifact: the pinned artifact, only for devices whose decision is
//    already that path name.
// A rollout that cannot apply to the device is skipped (with the reason in
// `considered`) and the next one in precedence is tried.
absl::StatusOr<RolloutResolution> ResolveWithRollouts(const policy::Policy& policy,
                                                      const v1::HardwareProfile& profile,
                                                      v1::Priority requested_priority,
                                                      const Labels& labels,
                                                      absl::string_view device_id,
                                                      const std::vector<v1::Rollout>& rollouts);
// The same with the profile already classified (policy::ClassifyHardware's
// class for `profile`), as a resolve has it from validating the request.
absl::StatusOr<RolloutResolution> ResolveWithRollouts(const policy::Policy& policy,
                                                      policy::HardwareClass hardware_class,
                                                      const v1::HardwareProfile& profile,
                                                      v1::Priority requested_priority,
                                                      const Labels& labels,
                                                      absl::string_view device_id,
                                                      const std::vector<v1::Rollout>& rollouts);

}  // namespace weightpath::deploy
