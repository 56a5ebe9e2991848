// rollout.yaml: the Rollout message written in YAML, with the proto field
// names (or their lowerCamel JSON names). It goes YAML -> JSON -> proto so
// the protobuf JSON rules decide every value, while the unknown-key check
// runs on the YAML first and can point at the line of the stray key.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::ctl {

// INVALID_ARGUMENT naming `source_name`, the line and the key path
// ("rollout.stages[1].percnt") for a key the message does not have, a key
// only the server sets (state, current_stage, members, control, created_at,
// stage_started_at, state_reason, sequential_gates, stage_entered_at,
// all_members, completed_at, failures_after_completion, stage_plans,
// stage_horizon: not
// listed among the allowed keys either), a value of the wrong shape, or a
// document that is not YAML.
absl::StatusOr<v1::Rollout> ParseRolloutYaml(absl::string_view yaml_text,
                                             absl::string_view source_name);

}  // namespace weightpath::ctl
