// The agent's side of WeightPath.ResolveWeightPath.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/agent_config.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace weightpath::agent {

// One channel to the server; each call carries its own deadline.
class ResolveClient {
 public:
  // Reads the PEM files named by `tls` (plaintext when absent);
  // FAILED_PRECONDITION naming tls.ca / tls.cert / tls.key when one is
  // unreadable. Creating the channel does not connect yet.
  static absl::StatusOr<std::unique_ptr<ResolveClient>> Create(const std::string& server,
                                                               const std::optional<TlsFiles>& tls);

  // The gRPC status code carries over unchanged, so the retry policy can
  // tell an unreachable server from a rejected request. The call may take
  // `timeout` from the moment it starts.
  absl::StatusOr<v1::ResolveWeightPathResponse> Resolve(
      const v1::ResolveWeightPathRequest& request, absl::Duration timeout);

 private:
  explicit ResolveClient(std::unique_ptr<v1::WeightPath::Stub> stub) : stub_(std::move(stub)) {}
  std::unique_ptr<v1::WeightPath::Stub> stub_;
};

// What this device asks: its id, probed profile, priority, model and
// labels from the config, and the agent's version. Boot and the run loop
// ask the same question. `held` is the decision the device already runs,
// if any: its etag lets the server answer "unchanged" in a few bytes.
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
