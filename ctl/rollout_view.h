// How weightpathctl shows rollouts: the progress view of one rollout (stage,
// members, outcomes against the control group, gate readings, state and
// reason), a one-line-per-rollout list, and protobuf JSON for scripts.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::ctl {

std::string FormatRolloutProgress(const v1::Rollout& rollout);

// "PROGRESSING", "COMPLETED", ... (the enum name without its prefix).
std::string RolloutStateName(v1::RolloutState state);

std::string FormatRolloutList(const std::vector<v1::Rollout>& rollouts);

// Each gate of the rollout at its last evaluation, one row per gate and
// hardware class: verdict, the statistic it was judged by, and the failures
// over trials of members and control devices. The threshold gates (the
// deltas) have one row over all classes; "not evaluated yet" before the
// first evaluation.
std::string FormatGateTable(const v1::Rollout& rollout);

}  // namespace weightpath::ctl
