// What the agent asks WeightPath.ResolveWeightPath, and what an answer means
// for the decision the device already holds. Boot and the run loop ask the
// same question; the call itself goes through WeightPathClient
// (weightpath_client.h).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "agent/config/agent_config.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// What this device asks: its id, probed profile, priority, model and
// labels from the config, and the agent's version. `held` is the decision
// the device already runs, if any: its etag lets the server answer
// "unchanged" in a few bytes.
v1::ResolveWeightPathRequest ResolveRequest(const AgentConfig& config,
                                            const v1::HardwareProfile& profile,
                                            const std::string& agent_version,
                                            const v1::ResolveWeightPathResponse* held = nullptr);

// What an answer means for the decision the device holds (`held`, may be
// null): the answer itself when it is a full decision; `held` when the
// server said unchanged to `held`'s etag. FAILED_PRECONDITION when it said
// unchanged to anything else, which no correct server does.
absl::StatusOr<v1::ResolveWeightPathResponse> DecisionFromAnswer(
    v1::ResolveWeightPathResponse answer, const v1::ResolveWeightPathResponse* held);

}  // namespace weightpath::agent
