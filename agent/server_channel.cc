#include "agent/server_channel.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/local_file.h"
#include "common/status_macros.h"
#include "grpc/support/time.h"
#include "grpcpp/grpcpp.h"

namespace weightpath::agent {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view field) {
  absl::StatusOr<std::string> contents = ReadLocalFile(path, field);
  if (!contents.ok()) return absl::FailedPreconditionError(contents.status().message());
  if (contents->empty()) {
    return absl::FailedPreconditionError(absl::StrCat(field, ": ", path, " is empty"));
  }
  return contents;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials(
    const std::optional<TlsFiles>& tls) {
  if (!tls.has_value()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  if (!tls->ca.empty()) { ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(tls->ca, "tls.ca")); }
  if (!tls->cert.empty()) {
    ASSIGN_OR_RETURN(options.pem_cert_chain, ReadPem(tls->cert, "tls.cert"));
    ASSIGN_OR_RETURN(options.pem_private_key, ReadPem(tls->key, "tls.key"));
  }
  return grpc::SslCredentials(options);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenServerChannel(
    const std::string& server, const std::optional<TlsFiles>& tls) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials, MakeCredentials(tls));
  grpc::ChannelArguments arguments;
  // The agent runs its own backoff across calls; gRPC's reconnect backoff
  // (1 s and growing) would otherwise make retries fail fast without trying.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(server, credentials, arguments);
}

void SetCallTimeout(grpc::ClientContext& context, absl::Duration timeout) {
  const int64_t millis = std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout));
  context.set_deadline(
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(millis, GPR_TIMESPAN)));
}

}  // namespace weightpath::agent
