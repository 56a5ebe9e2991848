// ExplainDecision: why a device gets its decision. For a full request the
// answer is exact. For a device id the request is rebuilt from the
// registry: the hardware profile, priority and labels the device sent with
// its last resolve, as it sent them, and the model it was given; the trace
// says when the profile was stored. A device not seen since the registry
// began keeping profiles is evaluated from the summary its record has
// (arch, CPU model, flags, accelerator), and the trace says that instead.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/config/policy_snapshot.h"
#include "store/store.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::server {

struct ExplainContext {
  const Snapshot* snapshot = nullptr;
  const std::vector<v1::Rollout>* rollouts = nullptr;
  store::FleetStore* store = nullptr;  // null: device ids cannot be explained
  // Replaces the policy-only verification with the fleet's evidence (the
  // same step a resolve takes); may be empty.
  std::function<void(const v1::ResolveWeightPathRequest&, v1::ResolveWeightPathResponse*)>
      apply_verification;
  // The verification matrix (FleetQueries::VerificationMatrix), read for
  // the evidence of every path in ExplainDecisionResponse.paths; unset
  // without a fleet store.
  std::function<absl::StatusOr<v1::GetVerificationMatrixResponse>()> verification_matrix;
  absl::Time now;
};

// rollout_detail is the rollout that shaped the decision, with its counts
// and gate readings, as GetRollout returns it.
// INVALID_ARGUMENT naming the field when neither subject is set or the
// request is invalid; NOT_FOUND naming the device id; FAILED_PRECONDITION
// when a device id is asked and there is no store.
absl::StatusOr<v1::ExplainDecisionResponse> ExplainDecision(const v1::ExplainDecisionRequest& request,
                                                            const ExplainContext& context);

// The request the registry's record of a device stands for (GetDevice's,
// with its hardware_profile).
v1::ResolveWeightPathRequest RequestFromRegistry(const v1::Device& device);

}  // namespace weightpath::server
