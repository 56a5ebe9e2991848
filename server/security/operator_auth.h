// Who may call weightpath.v1.FleetAdmin. Operators and devices share the
// gRPC port, so every admin call proves an operator identity:
//  * under mutual TLS, the client certificate decides: it must carry the
//    mark configured with --admin_identity (a device certificate, signed by
//    the same CA, lacks it and gets PERMISSION_DENIED);
//  * otherwise the call carries "authorization: Bearer <token>" metadata
//    matching the token in --admin_token_file (missing: UNAUTHENTICATED,
//    wrong: PERMISSION_DENIED).
#pragma once

#include <optional>
#include <vector>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"

namespace weightpath::server {

// What marks an operator certificate: "ou=NAME" (an OU attribute of the
// subject equals NAME) or "uri_prefix=PREFIX" (a URI SAN starts with PREFIX,
// e.g. spiffe://example.org/operator/).
struct AdminIdentity {
  enum class Kind { kOrganizationalUnit, kUriPrefix };
  Kind kind = Kind::kOrganizationalUnit;
  std::string value;
};

// INVALID_ARGUMENT naming --admin_identity for anything but the two forms.
absl::StatusOr<AdminIdentity> ParseAdminIdentity(absl::string_view text);

// The OU values of an RFC 2253 subject ("CN=a,OU=b,O=c"), escapes honoured.
std::vector<std::string> OrganizationalUnits(absl::string_view rfc2253_subject);

// What an operator may do on FleetAdmin, each role including the ones
// below it: viewer reads, operator also steers rollouts, admin may do
// everything (server/api/fleet_admin_roles.h says which call needs which).
enum class Role { kViewer = 0, kOperator = 1, kAdmin = 2 };
absl::string_view RoleName(Role role);
std::optional<Role> ParseRole(absl::string_view name);

// Who made an admitted call: the configured identity's name (for a
// certificate also its CN) and its role.
struct Caller {
  std::string identity;
  Role role = Role::kViewer;
};

// One identity the server admits: a bearer token (read from its file at
// start) or a certificate mark, and the role it gets.
struct OperatorCredential {
  std::string name;
  Role role = Role::kAdmin;
  std::string token_file;  // one of token_file and certificate
  std::string certificate;
  std::string source;  // "--admin_token_file", "FILE:LINE operators[1]": named in errors
};

class OperatorAuth {
 public:
  // `mutual_tls`: the port requires client certificates, so certificates
  // decide and tokens are not accepted. Token files are read here
  // (common/secret_file.h). INVALID_ARGUMENT / NOT_FOUND /
  // FAILED_PRECONDITION naming the credential's source; two identities
  // holding the same token are refused, as a call could not tell them apart.
  static absl::StatusOr<OperatorAuth> Create(bool mutual_tls,
                                             const std::vector<OperatorCredential>& credentials);
  // The single-admin form of --admin_identity / --admin_token_file.
  static absl::StatusOr<OperatorAuth> Create(bool mutual_tls, const std::string& admin_identity,
                                             const std::string& token_file);

  // The caller, or UNAUTHENTICATED (no credential sent) / PERMISSION_DENIED
  // (one no configured identity has).
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& context) const;
  absl::Status Authorize(const grpc::ServerContextBase& context) const {
    return Authenticate(context).status();
  }

 private:
  struct TokenIdentity {
    std::string name;
    Role role;
    std::string token;
  };
  struct CertificateIdentity {
    std::string name;
    Role role;
    AdminIdentity mark;
  };

  absl::StatusOr<Caller> AuthenticateCertificate(const grpc::AuthContext& auth_context) const;
  absl::StatusOr<Caller> AuthenticateToken(const grpc::ServerContextBase& context) const;

  bool mutual_tls_ = false;
  std::vector<TokenIdentity> tokens_;
  std::vector<CertificateIdentity> certificates_;
};

// Equal-length digests compared without an early exit, so the time taken
// says nothing about how much of a guessed token was right.
bool TokensEqual(absl::string_view presented, absl::string_view expected);

}  // namespace weightpath::server
