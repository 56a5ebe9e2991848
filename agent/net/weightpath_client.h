// The agent's one client of weightpath-server's WeightPath service: resolve,
// measurement and outcome calls all go over one channel (plaintext or
// (mutual) TLS from the config's tls files, with reconnect timing suited to
// the agent's own retry loop), each with a timeout that becomes a monotonic
// deadline, each finished call turned into an absl::Status by FromGrpcStatus
// (common/grpc_status.h), and retried, where a caller retries, with the
// config's one policy (ServerRetryOptions below, CallWithRetries in
// retry_policy.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config/agent_config.h"
#include "agent/net/retry_policy.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace weightpath::agent {

class WeightPathClient {
 public:
  // Reads the PEM files named by `tls` (plaintext when absent);
  // FAILED_PRECONDITION naming tls.ca / tls.cert / tls.key when one is
  // unreadable or empty. Creating the channel does not connect yet.
  static absl::StatusOr<std::unique_ptr<WeightPathClient>> Create(
      const std::string& server, const std::optional<TlsFiles>& tls);

  // Each call may take `timeout` from the moment it starts. The gRPC status
  // code carries over unchanged (the message prefixed with the method), so
  // the retry policy can tell an unreachable server from a rejected request
  // and a caller can keep an unsent report (UNAVAILABLE) apart from a
  // refused one (INVALID_ARGUMENT).
  absl::StatusOr<v1::ResolveWeightPathResponse> Resolve(
      const v1::ResolveWeightPathRequest& request, absl::Duration timeout);
  absl::StatusOr<v1::ReportOutcomeResponse> ReportOutcome(const v1::ReportOutcomeRequest& request,
                                                          absl::Duration timeout);
  absl::StatusOr<v1::ReportMeasurementResponse> ReportMeasurement(
      const v1::ReportMeasurementRequest& request, absl::Duration timeout);

 private:
  explicit WeightPathClient(std::unique_ptr<v1::WeightPath::Stub> stub) : stub_(std::move(stub)) {}
  std::unique_ptr<v1::WeightPath::Stub> stub_;
};

// Escapes, in place, every string field of `message` at any depth (repeated
// fields, map keys and values, nested messages; not `bytes`) that holds a
// byte sequence which is not well-formed UTF-8, a control character or a
// layout control, with ControlEscaped (common/control_characters.h).
// Returns whether anything changed.
//
// Every request goes through it before it leaves the agent. A proto3 string
// that is not UTF-8 makes the whole message unparseable to the server (the
// call fails INTERNAL, and a report is lost, not retried), and such text
// reaches requests from outside: an engine's readiness endpoint or a
// metadata mirror answering bytes like "\xff\xfe" in its status line,
// quoted into an error that becomes a report's detail; DMI strings in the
// hardware profile; labels in the config.
bool EscapeOutgoingStrings(google::protobuf::Message* message);

// How every call to the server is retried: the config's call_timeout and
// backoff (retry_base_delay, retry_max_delay).
RetryOptions ServerRetryOptions(const AgentConfig& config);

// Gives the call `timeout` from now, measured on the monotonic clock. A
// deadline given as wall-clock time (system_clock) is taken against the wall
// clock, so NTP stepping the date between computing it and the call would
// end the call at once or let it hang for months; gRPC takes a
// GPR_CLOCK_MONOTONIC deadline as it is.
void SetCallTimeout(grpc::ClientContext& context, absl::Duration timeout);

}  // namespace weightpath::agent
