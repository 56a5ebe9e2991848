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

class OperatorAuth {
 public:
  // `mutual_tls`: the port requires client certificates. `token_file`: ""
  // for none; read once here (surrounding whitespace ignored).
  // INVALID_ARGUMENT / NOT_FOUND naming the flag at fault.
  static absl::StatusOr<OperatorAuth> Create(bool mutual_tls, const std::string& admin_identity,
                                             const std::string& token_file);

  absl::Status Authorize(const grpc::ServerContextBase& context) const;

 private:
  absl::Status AuthorizeCertificate(const grpc::AuthContext& auth_context) const;
  absl::Status AuthorizeToken(const grpc::ServerContextBase& context) const;

  bool mutual_tls_ = false;
  std::optional<AdminIdentity> identity_;
  std::string token_;  // "" when no token file is configured
};

// Equal-length digests compared without an early exit, so the time taken
// says nothing about how much of a guessed token was right.
bool TokensEqual(absl::string_view presented, absl::string_view expected);

}  // namespace weightpath::server
