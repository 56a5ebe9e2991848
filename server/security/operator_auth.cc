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

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kOperator:
      return "operator";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

std::optional<Role> ParseRole(absl::string_view name) {
  for (Role role : {Role::kViewer, Role::kOperator, Role::kAdmin}) {
    if (RoleName(role) == name) return role;
  }
  return std::nullopt;
}

absl::StatusOr<OperatorAuth> OperatorAuth::Create(
    bool mutual_tls, const std::vector<OperatorCredential>& credentials) {
  OperatorAuth auth;
  auth.mutual_tls_ = mutual_tls;
  for (const OperatorCredential& credential : credentials) {
    if (!credential.certificate.empty()) {
      absl::StatusOr<AdminIdentity> mark = ParseAdminIdentity(credential.certificate);
      if (!mark.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(credential.source, ": ", mark.status().message()));
      }
      auth.certificates_.push_back({credential.name, credential.role, *std::move(mark)});
      continue;
    }
    ASSIGN_OR_RETURN(std::string token, ReadSecretFile(credential.token_file, credential.source));
    for (const TokenIdentity& earlier : auth.tokens_) {
      if (TokensEqual(token, earlier.token)) {
        return absl::InvalidArgumentError(absl::StrCat(
            credential.source, ": holds the same token as operator \"", earlier.name,
            "\"; each identity needs its own token"));
      }
    }
    auth.tokens_.push_back({credential.name, credential.role, std::move(token)});
  }
  return auth;
}

absl::StatusOr<OperatorAuth> OperatorAuth::Create(bool mutual_tls,
                                                  const std::string& admin_identity,
                                                  const std::string& token_file) {
  std::vector<OperatorCredential> credentials;
  if (!admin_identity.empty()) {
    // ParseAdminIdentity's message already names --admin_identity.
    RETURN_IF_ERROR(ParseAdminIdentity(admin_identity).status());
    credentials.push_back({"admin", Role::kAdmin, "", admin_identity, "--admin_identity"});
  }
  if (!token_file.empty()) {
    credentials.push_back({"admin", Role::kAdmin, token_file, "", "--admin_token_file"});
  }
  return Create(mutual_tls, credentials);
}

absl::StatusOr<Caller> OperatorAuth::Authenticate(const grpc::ServerContextBase& context) const {
  if (mutual_tls_) {
    std::shared_ptr<const grpc::AuthContext> auth_context = context.auth_context();
    return AuthenticateCertificate(*auth_context);
  }
  return AuthenticateToken(context);
}

namespace {

bool MatchesMark(const grpc::AuthContext& auth_context, const AdminIdentity& mark) {
  if (mark.kind == AdminIdentity::Kind::kOrganizationalUnit) {
    for (const grpc::string_ref& subject :
         auth_context.FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
      for (const std::string& unit :
           OrganizationalUnits(absl::string_view(subject.data(), subject.size()))) {
        if (unit == mark.value) return true;
      }
    }
    return false;
  }
  for (const grpc::string_ref& uri : auth_context.FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
    if (absl::StartsWith(absl::string_view(uri.data(), uri.size()), mark.value)) return true;
  }
  return false;
}

std::string MarkText(const AdminIdentity& mark) {
  return absl::StrCat(mark.kind == AdminIdentity::Kind::kOrganizationalUnit ? "OU=" : "a URI SAN starting ",
                      mark.value);
}

}  // namespace

absl::StatusOr<Caller> OperatorAuth::AuthenticateCertificate(
    const grpc::AuthContext& auth_context) const {
  if (certificates_.empty()) {
    return absl::PermissionDeniedError(
        "FleetAdmin under mutual TLS needs an operator certificate, and the server has no "
        "--admin_identity (or certificate in its operators) to recognise one");
  }
  // A certificate several identities recognise gets the highest of their roles.
  const CertificateIdentity* best = nullptr;
  for (const CertificateIdentity& identity : certificates_) {
    if (MatchesMark(auth_context, identity.mark) && (best == nullptr || identity.role > best->role)) {
      best = &identity;
    }
  }
  if (best == nullptr) {
    std::string wanted;
    for (const CertificateIdentity& identity : certificates_) {
      absl::StrAppend(&wanted, wanted.empty() ? "" : " or ", MarkText(identity.mark));
    }
    return absl::PermissionDeniedError(absl::StrCat(
        "client certificate is not an operator certificate (the server requires ", wanted, ")"));
  }
  Caller caller{best->name, best->role};
  for (const grpc::string_ref& cn : auth_context.FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
    absl::StrAppend(&caller.identity, " (CN=", absl::string_view(cn.data(), cn.size()), ")");
    break;
  }
  return caller;
}

absl::StatusOr<Caller> OperatorAuth::AuthenticateToken(const grpc::ServerContextBase& context) const {
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
  if (tokens_.empty()) {
    return absl::PermissionDeniedError(
        "the server has no --admin_token_file (nor token_file in its operators), so no bearer "
        "token is accepted");
  }
  // Every token is compared, so the time taken does not say which matched.
  const TokenIdentity* matched = nullptr;
  for (const TokenIdentity& identity : tokens_) {
    if (TokensEqual(presented, identity.token)) matched = &identity;
  }
  if (matched == nullptr) {
    return absl::PermissionDeniedError("authorization: the bearer token is not an operator token");
  }
  return Caller{matched->name, matched->role};
}

}  // namespace weightpath::server
