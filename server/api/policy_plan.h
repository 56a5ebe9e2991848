// PlanPolicy and PlanRollout: what a candidate policy document, or a
// rollout created, updated or deleted, would change for the
// registered devices. Each device with a stored profile is evaluated on the
// profile, labels and priority it last sent (RequestFromRegistry), by the
// policy the server runs and by the candidate; the devices whose path would
// change are counted by (hardware class, from, to), with a few example ids.
// PlanPolicy leaves rollouts out on both sides, so its plan is the policy's
// own change; PlanRollout evaluates the served policy with the rollouts the
// server holds, and with the candidate rollout in place (at its current or
// first stage, and complete) or without the deleted one. Nothing is loaded
// or recorded.
//
// Cost: one registry read of every device (pages of 1,000, with their
// profiles) and two or three policy evaluations each (tens to hundreds of ns); the
// candidate is loaded as a reload loads a policy (at most ~1 s of CPU for
// its totality check; the catalog is not checked against it, a reload still
// does that). The store calls end by the call's deadline.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "policy/policy.h"
#include "store/store.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::server {

inline constexpr uint32_t kDefaultPlanExamples = 3;
inline constexpr uint32_t kMaxPlanExamples = 20;
inline constexpr size_t kMaxPlanSourceNameBytes = 256;

// INVALID_ARGUMENT naming policy_yaml (empty, or refused by the policy
// loader, whose message names source_name:line and the key), source_name
// or examples; the store's errors as they are.
absl::StatusOr<v1::PlanPolicyResponse> PlanPolicy(const v1::PlanPolicyRequest& request,
                                                  const policy::Policy& current,
                                                  store::FleetStore& store, absl::Time now);

// One side of a plan: a policy and the rollouts shaping its decisions (as
// a resolve applies them, deploy::ResolveWithRollouts; none: the policy's
// own decision).
struct PlanSide {
  const policy::Policy* policy = nullptr;
  std::vector<v1::Rollout> rollouts;
};

struct PlanScope {
  std::optional<absl::Time> seen_since;  // unset: every registered device
  uint32_t examples = kDefaultPlanExamples;
};

// The machinery of every plan: one pass over the registry, each device with
// a stored profile evaluated by `before` and by each of `after`; one
// response per `after` side with the moves by (class, from, to). A
// destination a pin_artifact rollout serves reads "PATH (pinned VERSION)".
// Policy versions are left for the caller to fill.
absl::StatusOr<std::vector<v1::PlanPolicyResponse>> PlanDecisions(
    const PlanSide& before, const std::vector<PlanSide>& after, const PlanScope& scope,
    store::FleetStore& store, absl::Time now);

// PlanRollout (fleet_admin.proto): `rollouts` are every rollout the server
// holds. INVALID_ARGUMENT naming the field for a bad spec, a missing id or
// examples; NOT_FOUND naming rollout.id for the deletion of an unknown
// rollout; the refusal UpdateRollout would give an existing rollout
// (FAILED_PRECONDITION naming the field or the state); the store's errors.
absl::StatusOr<v1::PlanRolloutResponse> PlanRollout(const v1::PlanRolloutRequest& request,
                                                    const policy::Policy& current,
                                                    const std::vector<v1::Rollout>& rollouts,
                                                    store::FleetStore& store, absl::Time now);

// The devices a plan moves, all rows together.
uint64_t DevicesMoved(const v1::PlanPolicyResponse& plan);

}  // namespace weightpath::server
