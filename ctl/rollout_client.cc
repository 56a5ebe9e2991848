#include "ctl/rollout_client.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/secret_file.h"
#include "ctl/text_file.h"

namespace weightpath::ctl {
namespace {

absl::StatusOr<std::string> ReadNonEmpty(const SourcedValue& file) {
  absl::StatusOr<std::string> text = ReadTextFile(file.value);
  if (!text.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(file.source, ": ", text.status().message()));
  }
  if (absl::StripAsciiWhitespace(*text).empty()) {
    return absl::FailedPreconditionError(absl::StrCat(file.source, ": ", file.value, " is empty"));
  }
  return *text;
}

}  // namespace

std::vector<FlagSpec> ConnectionFlags() {
  return {
      {"server", '\0', true,
       "host:port of weightpath-server (default: WEIGHTPATH_SERVER, the config file's server, "
       "127.0.0.1:50051)"},
      {"ca", '\0', true, "CA bundle (PEM) to verify the server: enables TLS"},
      {"cert", '\0', true, "admin client certificate (PEM) for mutual TLS"},
      {"key", '\0', true, "private key (PEM) of --cert"},
      {"tls-server-name", '\0', true,
       "the name the server's certificate is checked against, when --server's host is not one "
       "it names (e.g. 127.0.0.1 through kubectl port-forward; default: the config file's "
       "tls.server_name)"},
      {"token-file", '\0', true,
       "file holding the operator bearer token, mode 600 (default: WEIGHTPATH_TOKEN_FILE, the "
       "config file's token_file)"},
      {"timeout", '\0', true, "deadline of each call in seconds (default 10)"},
  };
}

absl::StatusOr<FleetAdminConnection> FleetAdminConnection::Open(const ParsedArguments& arguments) {
  absl::StatusOr<ClientSettings> settings = ResolveClientSettings(arguments, ProcessEnvironment());
  if (!settings.ok()) return settings.status();
  return Open(arguments, *settings);
}

absl::StatusOr<FleetAdminConnection> FleetAdminConnection::Open(const ParsedArguments& arguments,
                                                                const ClientSettings& settings) {
  const bool has_cert = settings.cert.has_value();
  if (has_cert != settings.key.has_value()) {
    const SourcedValue& given = has_cert ? *settings.cert : *settings.key;
    return absl::InvalidArgumentError(absl::StrCat(
        given.source, " comes without ", has_cert ? "a key" : "a certificate",
        " (mutual TLS needs --cert and --key, or tls.cert and tls.key in the config file)"));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (settings.ca || has_cert) {
    grpc::SslCredentialsOptions options;
    if (settings.ca) {
      absl::StatusOr<std::string> pem = ReadNonEmpty(*settings.ca);
      if (!pem.ok()) return pem.status();
      options.pem_root_certs = *pem;
    }
    if (has_cert) {
      absl::StatusOr<std::string> cert = ReadNonEmpty(*settings.cert);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadNonEmpty(*settings.key);
      if (!key.ok()) return key.status();
      options.pem_cert_chain = *cert;
      options.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(options);
  }
  FleetAdminConnection connection;
  connection.tls_ = settings.ca.has_value() || has_cert;
  connection.client_certificate_ = has_cert;
  grpc::ChannelArguments channel_arguments;
  if (settings.server_name) {
    if (!connection.tls_) {
      return absl::InvalidArgumentError(absl::StrCat(
          settings.server_name->source, " names the server's certificate, but the connection is "
          "plaintext: give --ca (or tls.ca in the config file)"));
    }
    channel_arguments.SetSslTargetNameOverride(settings.server_name->value);
  }
  if (settings.token_file) {
    absl::StatusOr<std::string> token =
        ReadSecretFile(settings.token_file->value, settings.token_file->source);
    if (!token.ok()) return absl::FailedPreconditionError(token.status().message());
    connection.bearer_token_ = *std::move(token);
  }
  if (std::optional<std::string> timeout = arguments.Value("timeout")) {
    double seconds = 0;
    if (!absl::SimpleAtod(*timeout, &seconds) || !(seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--timeout: '", *timeout, "' is not a positive number of seconds"));
    }
    connection.timeout_ = absl::Seconds(seconds);
  }
  connection.channel_ =
      grpc::CreateCustomChannel(settings.server.value, credentials, channel_arguments);
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

absl::Status FleetAdminConnection::CallStatus(absl::string_view rpc, const grpc::Status& status,
                                              const grpc::ClientContext& context) const {
  const bool closed = status.error_code() == grpc::StatusCode::UNAVAILABLE &&
                      absl::StrContains(status.error_message(), "Socket closed");
  if (!closed || (tls_ && client_certificate_)) return FromGrpcStatus(rpc, status, context);
  const std::string hint =
      tls_ ? " (the server closed the connection in the TLS handshake: it most likely requires "
             "a client certificate, mutual TLS; give --cert and --key, or tls.cert and tls.key "
             "in the config file)"
           : " (the server closed the connection: if it serves TLS, give --ca with the CA "
             "bundle that signed its certificate, and under mutual TLS --cert and --key)";
  return FromGrpcStatus(
      rpc, grpc::Status(status.error_code(), status.error_message() + hint, status.error_details()),
      context);
}

}  // namespace weightpath::ctl
