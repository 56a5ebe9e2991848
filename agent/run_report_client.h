// The agent's side of WeightPath.ReportOutcome: what happened to the build
// the device was told to run.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/agent_config.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace weightpath::agent {

class ReportClient {
 public:
  // FAILED_PRECONDITION naming tls.ca / tls.cert / tls.key when unreadable.
  static absl::StatusOr<std::unique_ptr<ReportClient>> Create(const std::string& server,
                                                              const std::optional<TlsFiles>& tls);

  // The gRPC status code carries over, so a caller can keep an unsent report
  // (UNAVAILABLE) apart from a rejected one (INVALID_ARGUMENT).
  absl::StatusOr<v1::ReportOutcomeResponse> Report(const v1::ReportOutcomeRequest& request,
                                                   absl::Time deadline);

 private:
  explicit ReportClient(std::unique_ptr<v1::WeightPath::Stub> stub) : stub_(std::move(stub)) {}
  std::unique_ptr<v1::WeightPath::Stub> stub_;
};

// A key that names the report itself (device, rollout, outcome, instant), so
// resending the same report after a lost reply is deduplicated by the server.
std::string OutcomeIdempotencyKey(const v1::ReportOutcomeRequest& request);

}  // namespace weightpath::agent
