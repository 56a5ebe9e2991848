// Where each weight path of a policy stands for one device: chosen (at which
// priorities), compatible (it could run here; why another was chosen), or
// incompatible (the rule condition on the hardware that excludes it). For
// the operator's "which builds could this machine run, and why this one".
//
// Judged by the policy's own compiled rules (CompiledRules::
// FirstFailedCondition, the evaluator's test), never by a second reading of
// the rules. A path's requirements are the hardware conditions of the rules
// that route to it (hardware class, arch, supports_bf16, CPU flags); a rule's
// priority and label conditions are choices, so a path they alone keep from
// being chosen is compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/engine_args.h"
#include "policy/model_facts.h"
#include "policy/policy.h"

namespace weightpath::policy {

enum class PathStandingKind { kChosen, kCompatible, kIncompatible };

struct PathStanding {
  const PathDefinition* path = nullptr;  // owned by the Policy
  PathStandingKind standing = PathStandingKind::kIncompatible;
  // The priorities (SPEED, FIDELITY, in that order) whose decision it is.
  std::vector<v1::Priority> chosen_for;
  // Chosen: the rule that chose it at each priority. Compatible: why it is
  // not chosen. Incompatible: each rule routing to it and the hardware
  // condition it fails, or that no rule routes to it.
  std::string reason;
  // The path's requirements (`requires`) judged for this device and model
  // (engine_args.h). A path the rules would choose or allow but whose
  // requirement fails is incompatible unless chosen; a chosen one keeps
  // its standing and carries the failure here.
  PathFit fit;
};

// `path` judged for a profile and labels. INVALID_ARGUMENT when the profile
// cannot be classified (as Evaluate).
absl::StatusOr<PathStanding> JudgePath(const Policy& policy, const PathDefinition& path,
                                       const v1::HardwareProfile& profile, const Labels& labels,
                                       const ModelFacts& model = {});

// Every path definition of the policy, in document order.
absl::StatusOr<std::vector<PathStanding>> JudgePaths(const Policy& policy,
                                                     const v1::HardwareProfile& profile,
                                                     const Labels& labels,
                                                     const ModelFacts& model = {});

}  // namespace weightpath::policy
