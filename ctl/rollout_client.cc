#include "ctl/rollout_client.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ctl/text_file.h"

namespace weightpath::ctl {
namespace {

absl::StatusOr<std::string> ReadNonEmpty(const std::string& path, absl::string_view flag) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("--", flag, ": ", text.status().message()));
  }
  if (absl::StripAsciiWhitespace(*text).empty()) {
    return absl::FailedPreconditionError(absl::StrCat("--", flag, ": ", path, " is empty"));
  }
  return *text;
}

}  // namespace

std::vector<FlagSpec> ConnectionFlags() {
  return {
      {"server", '\0', true, "host:port of weightpath-server (required)"},
      {"ca", '\0', true, "CA bundle (PEM) to verify the server: enables TLS"},
      {"cert", '\0', true, "admin client certificate (PEM) for mutual TLS"},
      {"key", '\0', true, "private key (PEM) of --cert"},
      {"token-file", '\0', true, "file holding the operator bearer token"},
      {"timeout", '\0', true, "deadline of each call in seconds (default 10)"},
  };
}

absl::StatusOr<FleetAdminConnection> FleetAdminConnection::Open(const ParsedArguments& arguments) {
  std::optional<std::string> server = arguments.Value("server");
  if (!server || server->empty()) {
    return absl::InvalidArgumentError("--server HOST:PORT is required");
  }
  const bool has_cert = arguments.Has("cert");
  if (has_cert != arguments.Has("key")) {
    return absl::InvalidArgumentError(
        absl::StrCat(has_cert ? "--key" : "--cert", " is required with ",
                     has_cert ? "--cert" : "--key", " (mutual TLS needs both)"));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (arguments.Has("ca") || has_cert) {
    grpc::SslCredentialsOptions options;
    if (std::optional<std::string> ca = arguments.Value("ca")) {
      absl::StatusOr<std::string> pem = ReadNonEmpty(*ca, "ca");
      if (!pem.ok()) return pem.status();
      options.pem_root_certs = *pem;
    }
    if (has_cert) {
      absl::StatusOr<std::string> cert = ReadNonEmpty(*arguments.Value("cert"), "cert");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadNonEmpty(*arguments.Value("key"), "key");
      if (!key.ok()) return key.status();
      options.pem_cert_chain = *cert;
      options.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(options);
  }
  FleetAdminConnection connection;
  if (std::optional<std::string> token_file = arguments.Value("token-file")) {
    absl::StatusOr<std::string> token = ReadNonEmpty(*token_file, "token-file");
    if (!token.ok()) return token.status();
    connection.bearer_token_ = std::string(absl::StripAsciiWhitespace(*token));
  }
  if (std::optional<std::string> timeout = arguments.Value("timeout")) {
    double seconds = 0;
    if (!absl::SimpleAtod(*timeout, &seconds) || !(seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--timeout: '", *timeout, "' is not a positive number of seconds"));
    }
    connection.timeout_ = absl::Seconds(seconds);
  }
  connection.channel_ = grpc::CreateChannel(*server, credentials);
  connection.stub_ = v1::FleetAdmin::NewStub(connection.channel_);
  return connection;
}

std::unique_ptr<grpc::ClientContext> FleetAdminConnection::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  if (!bearer_token_.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", bearer_token_));
  }
  return context;
}

}  // namespace weightpath::ctl
