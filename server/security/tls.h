// Transport security: which credentials the gRPC port gets, whether
// plaintext is acceptable on the address, and the per-call identity check
// under mutual TLS.
#pragma once

#include "absl/strings/string_view.h"
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/security/server_credentials.h"
#include "server/config/server_config.h"
#include "server/security/tls_reloader.h"

namespace weightpath::server {

// True for 127.0.0.0/8, ::1 and localhost (with a port, e.g. "127.0.0.1:0").
bool IsLoopbackAddress(absl::string_view host_port);

// Plaintext on a non-loopback address must be asked for with --insecure:
// devices would otherwise send profiles and get artifact URIs unprotected
// on a shared network without anyone having chosen that. FAILED_PRECONDITION
// naming --listen when refused.
absl::Status CheckTransportPolicy(const ServerConfig& config);

struct ServerTransport {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // With TLS, what keeps the served files current (Start() it once the
  // server is up); null for plaintext.
  std::unique_ptr<TlsReloader> tls;
};

// TLS from --tls_cert/--tls_key; with --client_ca, client certificates are
// required and verified against it. Insecure credentials without TLS. A
// missing or unusable file (see LoadTlsMaterial) is an error naming its flag.
absl::StatusOr<ServerTransport> BuildServerCredentials(const ServerConfig& config);

// Under mutual TLS a device may only resolve as itself: `device_id` must
// equal the certificate's common name or one of its subject alternative
// names (DNS or URI); PERMISSION_DENIED naming device_id otherwise.
absl::Status CheckDeviceIdentity(const grpc::AuthContext& auth_context, absl::string_view device_id);

}  // namespace weightpath::server
