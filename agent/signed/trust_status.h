// What a device trusts of the signed artifact metadata (TUF), for
// `weightpath-agent trust status`: from state_dir/trust-state.json (or
// trust.root before the first update), without any network. Per role the
// version, expiry and key ids with their threshold, the delegated roles,
// and notes (a persisted copy that no longer verifies, an expired role, a
// state that fell back to trust.root).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config/trust_config.h"
#include "trust/json.h"

namespace weightpath::agent {

// The status as JSON (what -o json prints) at `now`:
//   {"source", "metadata_url", "reference_time",
//    "roles": {"root"|"timestamp"|"snapshot"|"targets":
//              {"version", "expires", "expired", "verified", ["not_verified"],
//               "threshold", "keyids", ...} or null},
//    "delegations": [...], "notes": [...]}
// FAILED_PRECONDITION when neither the state nor trust.root can be used.
absl::StatusOr<trust::Json> TrustStatus(const TrustConfig& config, const std::string& state_dir,
                                        absl::Time now);
// The text form of TrustStatus.
std::string TrustStatusText(const trust::Json& status);

}  // namespace weightpath::agent
