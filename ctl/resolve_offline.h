// Resolving without a server: the same policy library the server uses,
// evaluated in-process. Nothing is fetched, so the artifact stays empty.
#pragma once

#include "absl/status/statusor.h"
#include "policy/policy.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::ctl {

// INVALID_ARGUMENT when the profile cannot be classified.
absl::StatusOr<v1::ResolveWeightPathResponse> ResolveOffline(
    const policy::Policy& policy, const v1::ResolveWeightPathRequest& request);

}  // namespace weightpath::ctl
