// weightpathctl's connection to FleetAdmin: the channel (plaintext or TLS,
// with an admin client certificate for mutual TLS) and the operator's bearer
// token, which rides on every call as `authorization: Bearer <token>`.
#pragma once

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/command_line.h"
#include "ctl/client_config.h"
#include "grpcpp/grpcpp.h"
#include "weightpath/v1/fleet_admin.grpc.pb.h"

namespace weightpath::ctl {

// The flags every remote subcommand shares.
std::vector<FlagSpec> ConnectionFlags();

class FleetAdminConnection {
 public:
  // The server and credentials from the flags, the environment and the
  // config file (ctl/client_config.h). INVALID_ARGUMENT naming the source
  // when a certificate comes without its key (or the reverse);
  // FAILED_PRECONDITION naming the source when a file is unreadable or
  // empty, or a token file is a symlink or readable by others.
  static absl::StatusOr<FleetAdminConnection> Open(const ParsedArguments& arguments);
  static absl::StatusOr<FleetAdminConnection> Open(const ParsedArguments& arguments,
                                                   const ClientSettings& settings);

  v1::FleetAdmin::Stub& stub() { return *stub_; }
  // The same channel, for the device-facing WeightPath service.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  // A context with the deadline and the operator's token set.
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  // A finished call's status, as FromGrpcStatus(`rpc`, ...) makes it
  // (common/grpc_status.h). A server that requires what this connection
  // does not present closes the connection in the TLS handshake, which
  // gRPC reports as UNAVAILABLE "Socket closed" and nothing more: the
  // message then also says which flags supply it (a client certificate, or
  // TLS at all).
  absl::Status CallStatus(absl::string_view rpc, const grpc::Status& status,
                          const grpc::ClientContext& context) const;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<v1::FleetAdmin::Stub> stub_;
  std::string bearer_token_;
  absl::Duration timeout_ = absl::Seconds(10);
  bool tls_ = false;
  bool client_certificate_ = false;
};

}  // namespace weightpath::ctl
