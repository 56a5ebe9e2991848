// Refuses a rollout that could not run safely, naming the field at fault.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "policy/policy.h"
#include "google/protobuf/descriptor.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::deploy {

// INVALID_ARGUMENT, naming the field (e.g. "rollout.stages[2].percent"), for:
//  - id: empty, longer than 63, or not [a-z0-9] with '-', '_' or '.' inside;
//  - selector: bad keys/values/operators/classes, or empty without `all`;
//  - action: unset; set_priority UNSPECIFIED; pin_path not a policy path id;
//    pin_artifact.path not a policy path name, or its artifact without a
//    http/https/file uri (unless it names a signed build by target_path
//    alone, which the server completes), listing files, or with a sha256
//    other than 64 lowercase hex;
//  - stages: none; percent outside 1..100; not strictly increasing; the last
//    not 100 (a rollout that completes must cover its whole selector);
//    report_timeout_seconds 0 (silence must eventually count as failure);
//  - gates: a threshold outside [0, 1] or not a number.
// Only the specification is checked; state fields are ignored here.
absl::Status ValidateRollout(const v1::Rollout& rollout, const policy::Policy& policy);

// The Rollout fields only the server sets: its progress, times and counts
// (state, current_stage, created_at, stage_started_at, state_reason,
// members, control, stage_entered_at, sequential_gates). Every other field
// is the spec an operator writes.
bool IsServerSetRolloutField(const google::protobuf::FieldDescriptor& field);

// INVALID_ARGUMENT naming the first server-set field `spec` sets (e.g.
// "rollout.state"), saying that the server sets it.
absl::Status RequireSpecOnly(const v1::Rollout& spec);

// The spec fields (by proto name) in which `a` and `b` differ.
std::vector<std::string> DifferingSpecFields(const v1::Rollout& a, const v1::Rollout& b);

// `current` with the spec of `spec` (same id), for UpdateRollout. The spec
// must be valid as for StartRollout and set no server field. What may
// change while the rollout runs is what does not change who is in it or
// what they were sent: description, precedence, gates, and the stages from
// the one after the current stage on (and every stage's bake, reporting
// minimum and report timeout); progress, times and counts are kept.
// FAILED_PRECONDITION, naming the field, for a changed selector or action
// (the members, the control group and every outcome so far belong to the
// old ones: abort, delete and create the rollout again), for a changed
// percent of a stage already entered, and for a rollout that has finished
// (COMPLETED, ABORTED or ROLLED_BACK), naming its state.
absl::StatusOr<v1::Rollout> UpdateRolloutSpec(const v1::Rollout& current, const v1::Rollout& spec,
                                              const policy::Policy& policy);

// A validated copy ready to store: PROGRESSING at stage 0, created and
// stage 0 entered at `now`, outcomes cleared, whatever state the caller sent
// replaced.
absl::StatusOr<v1::Rollout> StartRollout(const v1::Rollout& spec, const policy::Policy& policy,
                                         absl::Time now);

}  // namespace weightpath::deploy
