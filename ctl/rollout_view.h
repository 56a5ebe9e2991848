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

std::string FormatRolloutList(const std::vector<v1::Rollout>& rollouts);

// Protobuf JSON with the proto field names, indented, one trailing newline.
absl::StatusOr<std::string> RolloutJson(const google::protobuf::Message& message);

}  // namespace weightpath::ctl
