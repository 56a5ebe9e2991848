// PlanPolicy: what a candidate policy document would change for the
// registered devices. Each device with a stored profile is evaluated on the
// profile, labels and priority it last sent (RequestFromRegistry), by the
// policy the server runs and by the candidate; the devices whose path would
// change are counted by (hardware class, from, to), with a few example ids.
// Rollouts are left out on both sides, so the plan is the policy's own
// change. Nothing is loaded or recorded.
//
// Cost: one registry read of every device (pages of 1,000, with their
// profiles) and two policy evaluations each (tens to hundreds of ns); the
// candidate is loaded as a reload loads a policy (at most ~1 s of CPU for
// its totality check; the catalog is not checked against it, a reload still
// does that). The store calls end by the call's deadline.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "policy/policy.h"
#include "store/store.h"
#include "weightpath/v1/fleet.pb.h"

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

}  // namespace weightpath::server
