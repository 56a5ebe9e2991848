// The agent's one way to reach weightpath-server: plaintext or (mutual) TLS
// from the config's tls files, with reconnect timing suited to the agent's
// own retry loop. Every agent client (resolve, outcome, measurement) uses it;
// their finished calls go through FromGrpcStatus (common/grpc_status.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/agent_config.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace weightpath::agent {

// FAILED_PRECONDITION naming tls.ca / tls.cert / tls.key when a file is
// unreadable or empty.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenServerChannel(
    const std::string& server, const std::optional<TlsFiles>& tls);

// Gives the call `timeout` from now, measured on the monotonic clock. A
// deadline given as wall-clock time (system_clock) is taken against the wall
// clock, so NTP stepping the date between computing it and the call would
// end the call at once or let it hang for months; gRPC takes a
// GPR_CLOCK_MONOTONIC deadline as it is.
void SetCallTimeout(grpc::ClientContext& context, absl::Duration timeout);

}  // namespace weightpath::agent
