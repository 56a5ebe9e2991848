// The agent's one way to reach weightpath-server: plaintext or (mutual) TLS
// from the config's tls files, with reconnect timing suited to the agent's
// own retry loop. Every agent client (resolve, outcome, measurement) uses it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "grpcpp/channel.h"

namespace weightpath::agent {

// FAILED_PRECONDITION naming tls.ca / tls.cert / tls.key when a file is
// unreadable or empty.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenServerChannel(
    const std::string& server, const std::optional<TlsFiles>& tls);

}  // namespace weightpath::agent
