#include "server/security/tls.h"

#include <grpc/grpc_security_constants.h>

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/host_port.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace weightpath::server {

bool IsLoopbackAddress(absl::string_view host_port) {
  const std::string host = SplitHostPort(host_port).host;
  if (host == "localhost" || host == "::1") return true;
  const std::vector<absl::string_view> octets = absl::StrSplit(host, '.');
  if (octets.size() != 4 || octets[0] != "127") return false;
  for (absl::string_view octet : octets) {
    int value = 0;
    if (!absl::SimpleAtoi(octet, &value) || value < 0 || value > 255) return false;
  }
  return true;
}

absl::Status CheckTransportPolicy(const ServerConfig& config) {
  if (!config.tls_cert_path.empty() || IsLoopbackAddress(config.listen) || config.insecure) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "--listen=", config.listen,
      " is not a loopback address: serve it with --tls_cert and --tls_key, or pass --insecure "
      "to accept plaintext gRPC there"));
}

absl::StatusOr<ServerTransport> BuildServerCredentials(const ServerConfig& config) {
  if (config.tls_cert_path.empty()) {
    return ServerTransport{grpc::InsecureServerCredentials(), nullptr};
  }
  // Renewed certificates and a new client CA bundle (cert-manager rewrites a
  // Secret's files in place) are served from the next check on, without a
  // restart; files that do not pass the checks leave the set in use serving.
  absl::StatusOr<std::unique_ptr<TlsReloader>> reloader = TlsReloader::Create(
      TlsPaths{config.tls_cert_path, config.tls_key_path, config.client_ca_path},
      config.reload_interval);
  if (!reloader.ok()) return reloader.status();
  grpc::experimental::TlsServerCredentialsOptions options((*reloader)->provider());
  options.watch_identity_key_cert_pairs();
  if ((*reloader)->has_client_ca()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return ServerTransport{grpc::experimental::TlsServerCredentials(options), *std::move(reloader)};
}

absl::Status CheckDeviceIdentity(const grpc::AuthContext& auth_context,
                                 absl::string_view device_id) {
  for (const char* property :
       {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME, GRPC_PEER_DNS_PROPERTY_NAME,
        GRPC_PEER_URI_PROPERTY_NAME}) {
    for (const grpc::string_ref& identity : auth_context.FindPropertyValues(property)) {
      if (absl::string_view(identity.data(), identity.size()) == device_id) {
        return absl::OkStatus();
      }
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "device_id \"", device_id,
      "\" does not match the client certificate's common name or subject alternative names"));
}

}  // namespace weightpath::server
