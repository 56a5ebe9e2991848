// ExplainDecisionResponse.paths: every weight path of the policy judged for
// one device (policy/path_standing.h: chosen and at which priorities,
// compatible and why not chosen, incompatible and the rule condition that
// excludes it), each with the fleet's evidence for its build on the device's
// hardware class and CPU model: the verification a resolve would report,
// how many devices reported it, their median decode tok/s, and the policy's
// expected figure for that CPU. And NVIDIA NIM's three groups for the
// model (runnable, low on memory, incompatible: the path's `requires` and
// the rules' hardware conditions), with the memory per GPU it needs, the
// context that fits and the engine arguments a decision would carry.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/model_facts.h"
#include "policy/policy.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::server {

// `request` has passed ValidateResolveRequest; `hardware_class` is its
// decision's. `matrix`: the verification matrix as FleetQueries reads it, or
// null when the server has no fleet store (the policy's flags stand); a
// matrix that could not be read marks each path's verification UNAVAILABLE.
// `model`: the catalog's facts for the decision's model.
absl::Status FillPathCandidates(
    const policy::Policy& policy, const v1::ResolveWeightPathRequest& request,
    std::string_view hardware_class, const policy::ModelFacts& model,
    const absl::StatusOr<v1::GetVerificationMatrixResponse>* matrix,
    google::protobuf::RepeatedPtrField<v1::PathCandidate>* candidates);

}  // namespace weightpath::server
