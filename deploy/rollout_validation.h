// Refuses a rollout that could not run safely, naming the field at fault.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "policy/policy.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::deploy {

// INVALID_ARGUMENT, naming the field (e.g. "rollout.stages[2].percent"), for:
//  - id: empty, longer than 63, or not [a-z0-9] with '-', '_' or '.' inside;
//  - selector: bad keys/values/operators/classes, or empty without `all`;
//  - action: unset; set_priority UNSPECIFIED; pin_path not a policy path id;
//    pin_artifact.path not a policy path name, or its artifact without a
//    http/https/file uri or with a sha256 other than 64 lowercase hex;
//  - stages: none; percent outside 1..100; not strictly increasing; the last
//    not 100 (a rollout that completes must cover its whole selector);
//    report_timeout_seconds 0 (silence must eventually count as failure);
//  - gates: a threshold outside [0, 1] or not a number.
// Only the specification is checked; state fields are ignored here.
absl::Status ValidateRollout(const v1::Rollout& rollout, const policy::Policy& policy);

// A validated copy ready to store: PROGRESSING at stage 0, created and
// stage 0 entered at `now`, outcomes cleared, whatever state the caller sent
// replaced.
absl::StatusOr<v1::Rollout> StartRollout(const v1::Rollout& spec, const policy::Policy& policy,
                                         absl::Time now);

}  // namespace weightpath::deploy
