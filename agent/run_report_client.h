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
  // The call may take `timeout` from the moment it starts.
  absl::StatusOr<v1::ReportOutcomeResponse> Report(const v1::ReportOutcomeRequest& request,
                                                   absl::Duration timeout);

 private:
  explicit ReportClient(std::unique_ptr<v1::WeightPath::Stub> stub) : stub_(std::move(stub)) {}
  std::unique_ptr<v1::WeightPath::Stub> stub_;
};

// The report of `outcome` about the build `about` names (path, artifact,
// policy version, rollout attribution), observed at `observed_at` (wall
// time: a timestamp the server stores, not an interval) and keyed
// with OutcomeIdempotencyKey. `detail` is cut to the server's 1024 bytes
// (common/report_limits.h) at a UTF-8 character boundary. Task counts are the caller's to add: they are
// not part of the key.
v1::ReportOutcomeRequest OutcomeReport(const std::string& device_id, v1::Outcome outcome,
                                       const v1::ResolveWeightPathResponse& about,
                                       const std::string& detail, absl::Time observed_at);

// A key that names the report itself (device, rollout, outcome, instant), so
// resending the same report after a lost reply is deduplicated by the server.
std::string OutcomeIdempotencyKey(const v1::ReportOutcomeRequest& request);

}  // namespace weightpath::agent
