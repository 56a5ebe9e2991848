// Turns a validated request and one snapshot into a response. Independent of
// gRPC so fleet recording, verification evidence, rollouts and
// ExplainDecision can wrap or reuse it.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "policy/hardware_class.h"
#include "server/policy_snapshot.h"
#include "weightpath/v1/rollout.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

// What the metrics need to know about a call, filled as far as resolving got
// (an unknown model still has a hardware class and a path).
struct ResolveSummary {
  std::optional<policy::HardwareClass> hardware_class;
  absl::string_view path_name;  // owned by the snapshot's policy
  v1::Priority effective_priority = v1::PRIORITY_UNSPECIFIED;
};

// NOT_FOUND naming the known models when `request.model` is not in the
// catalog; INVALID_ARGUMENT when the profile cannot be classified.
// `rollouts` (the in-memory cache's) may shape the decision
// (deploy::ResolveWithRollouts); the response then names the rollout, and
// resolve_interval_seconds is set either way. `considered`, when given,
// receives why each rollout did or did not apply (ExplainDecision).
absl::Status Resolve(const v1::ResolveWeightPathRequest& request, const Snapshot& snapshot,
                     v1::ResolveWeightPathResponse* response, ResolveSummary* summary,
                     const std::vector<v1::Rollout>& rollouts = {},
                     std::vector<std::string>* considered = nullptr);

}  // namespace weightpath::server
