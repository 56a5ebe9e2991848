#include "server/security/operator_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "grpc/grpc_security_constants.h"
#include "common/secret_file.h"

namespace weightpath::server {
namespace {

constexpr absl::string_view kBearerPrefix = "Bearer ";

std::vector<unsigned char> Sha256(absl::string_view text) {
  std::vector<unsigned char> digest(SHA256_DIGEST_LENGTH);
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

}  // namespace

bool TokensEqual(absl::string_view presented, absl::string_view expected) {
  // Hashing first gives both sides the same length, so neither the length
  // nor the matching prefix of a guess leaks through timing.
  const std::vector<unsigned char> a = Sha256(presented);
  const std::vector<unsigned char> b = Sha256(expected);
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::StatusOr<AdminIdentity> ParseAdminIdentity(absl::string_view text) {
  AdminIdentity identity;
  absl::string_view value = text;
  if (absl::ConsumePrefix(&value, "ou=")) {
    identity.kind = AdminIdentity::Kind::kOrganizationalUnit;
  } else if (absl::ConsumePrefix(&value, "uri_prefix=")) {
    identity.kind = AdminIdentity::Kind::kUriPrefix;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_identity=\"", text,
        "\" must be ou=NAME (certificate subject OU) or uri_prefix=PREFIX (URI SAN prefix)"));
  }
  if (value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--admin_identity=\"", text, "\" has an empty value"));
  }
  identity.value = std::string(value);
  return identity;
}

std::vector<std::string> OrganizationalUnits(absl::string_view subject) {
  // RFC 4514: a backslash escapes the next character, which is then part of
  // the value (a separator, or a leading or trailing space). Only unescaped
  // whitespace around an attribute is dropped, so "OU=operators\\ " (a
  // trailing escaped space) is the unit "operators ", not "operators".
  std::vector<std::string> units;
  std::string attribute;
  size_t keep_from = std::string::npos;  // first escaped byte, never trimmed
  size_t keep_to = 0;                    // one past the last escaped byte
  auto finish = [&] {
    size_t begin = 0;
    size_t end = attribute.size();
    while (begin < end && begin < keep_from && absl::ascii_isspace(attribute[begin])) ++begin;
    while (end > begin && end > keep_to && absl::ascii_isspace(attribute[end - 1])) --end;
    const absl::string_view trimmed(attribute.data() + begin, end - begin);
    if (trimmed.size() >= 3 && absl::StartsWithIgnoreCase(trimmed, "OU=") && begin + 3 <= keep_from) {
      units.emplace_back(trimmed.substr(3));
    }
    attribute.clear();
    keep_from = std::string::npos;
    keep_to = 0;
  };
  for (size_t i = 0; i < subject.size(); ++i) {
    const char c = subject[i];
    if (c == '\\' && i + 1 < subject.size()) {
      if (keep_from == std::string::npos) keep_from = attribute.size();
      attribute.push_back(subject[++i]);
      keep_to = attribute.size();
    } else if (c == ',' || c == '+') {
      finish();
    } else {
      attribute.push_back(c);
    }
  }
  finish();
  return units;
}

absl::StatusOr<OperatorAuth> OperatorAuth::Create(bool mutual_tls,
                                                  const std::string& admin_identity,
                                                  const std::string& token_file) {
  OperatorAuth auth;
  auth.mutual_tls_ = mutual_tls;
  if (!admin_identity.empty()) {
    ASSIGN_OR_RETURN(auth.identity_, ParseAdminIdentity(admin_identity));
  }
  if (!token_file.empty()) {
    ASSIGN_OR_RETURN(auth.token_, ReadSecretFile(token_file, "--admin_token_file"));
  }
  return auth;
}

absl::Status OperatorAuth::Authorize(const grpc::ServerContextBase& context) const {
  if (mutual_tls_) {
    std::shared_ptr<const grpc::AuthContext> auth_context = context.auth_context();
    return AuthorizeCertificate(*auth_context);
  }
  return AuthorizeToken(context);
}

absl::Status OperatorAuth::AuthorizeCertificate(const grpc::AuthContext& auth_context) const {
  if (!identity_.has_value()) {
    return absl::PermissionDeniedError(
        "FleetAdmin under mutual TLS needs an operator certificate, and the server has no "
        "--admin_identity to recognise one");
  }
  if (identity_->kind == AdminIdentity::Kind::kOrganizationalUnit) {
    for (const grpc::string_ref& subject :
         auth_context.FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
      for (const std::string& unit :
           OrganizationalUnits(absl::string_view(subject.data(), subject.size()))) {
        if (unit == identity_->value) return absl::OkStatus();
      }
    }
  } else {
    for (const grpc::string_ref& uri : auth_context.FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
      if (absl::StartsWith(absl::string_view(uri.data(), uri.size()), identity_->value)) {
        return absl::OkStatus();
      }
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "client certificate is not an operator certificate (--admin_identity requires ",
      identity_->kind == AdminIdentity::Kind::kOrganizationalUnit ? "OU=" : "a URI SAN starting ",
      identity_->value, ")"));
}

absl::Status OperatorAuth::AuthorizeToken(const grpc::ServerContextBase& context) const {
  const auto& metadata = context.client_metadata();
  auto found = metadata.find("authorization");
  if (found == metadata.end()) {
    return absl::UnauthenticatedError(
        "FleetAdmin needs an operator identity: send \"authorization: Bearer <token>\" metadata");
  }
  const absl::string_view header(found->second.data(), found->second.size());
  absl::string_view presented = header;
  if (!absl::ConsumePrefix(&presented, kBearerPrefix) || presented.empty()) {
    return absl::UnauthenticatedError(
        "authorization metadata must be \"Bearer <token>\"");
  }
  if (token_.empty()) {
    return absl::PermissionDeniedError(
        "the server has no --admin_token_file, so no bearer token is accepted");
  }
  if (!TokensEqual(presented, token_)) {
    return absl::PermissionDeniedError("authorization: the bearer token is not the operator token");
  }
  return absl::OkStatus();
}

}  // namespace weightpath::server
