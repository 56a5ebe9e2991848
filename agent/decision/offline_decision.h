// The decision a device makes for itself when no server answers: the
// embedded default policy, evaluated on the probed profile.
#pragma once

#include "absl/status/statusor.h"
#include "agent/config/agent_config.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// A response shaped like the server's, without an artifact (only the
// catalog knows where builds live) and with verification SOURCE_NONE (no
// fleet evidence was consulted). INVALID_ARGUMENT when the profile cannot
// be classified.
absl::StatusOr<v1::ResolveWeightPathResponse> EvaluateOffline(const v1::HardwareProfile& profile,
                                                              const AgentConfig& config);

}  // namespace weightpath::agent
