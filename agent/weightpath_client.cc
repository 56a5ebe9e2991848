#include "agent/weightpath_client.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "agent/local_file.h"
#include "common/grpc_status.h"
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

// One unary call with its deadline and its status conversion.
template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> Call(absl::string_view name, v1::WeightPath::Stub& stub, Method method,
                              const Request& request, absl::Duration timeout) {
  grpc::ClientContext context;
  SetCallTimeout(context, timeout);
  Response response;
  const grpc::Status status = (stub.*method)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(name, status, context);
  return response;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WeightPathClient>> WeightPathClient::Create(
    const std::string& server, const std::optional<TlsFiles>& tls) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials, MakeCredentials(tls));
  grpc::ChannelArguments arguments;
  // The agent runs its own backoff across calls; gRPC's reconnect backoff
  // (1 s and growing) would otherwise make retries fail fast without trying.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return std::unique_ptr<WeightPathClient>(new WeightPathClient(
      v1::WeightPath::NewStub(grpc::CreateCustomChannel(server, credentials, arguments))));
}

absl::StatusOr<v1::ResolveWeightPathResponse> WeightPathClient::Resolve(
    const v1::ResolveWeightPathRequest& request, absl::Duration timeout) {
  return Call<v1::ResolveWeightPathRequest, v1::ResolveWeightPathResponse>(
      "ResolveWeightPath", *stub_, &v1::WeightPath::Stub::ResolveWeightPath, request, timeout);
}

absl::StatusOr<v1::ReportOutcomeResponse> WeightPathClient::ReportOutcome(
    const v1::ReportOutcomeRequest& request, absl::Duration timeout) {
  return Call<v1::ReportOutcomeRequest, v1::ReportOutcomeResponse>(
      "ReportOutcome", *stub_, &v1::WeightPath::Stub::ReportOutcome, request, timeout);
}

absl::StatusOr<v1::ReportMeasurementResponse> WeightPathClient::ReportMeasurement(
    const v1::ReportMeasurementRequest& request, absl::Duration timeout) {
  return Call<v1::ReportMeasurementRequest, v1::ReportMeasurementResponse>(
      "ReportMeasurement", *stub_, &v1::WeightPath::Stub::ReportMeasurement, request, timeout);
}

RetryOptions ServerRetryOptions(const AgentConfig& config) {
  return RetryOptions{config.call_timeout, config.retry_base_delay, config.retry_max_delay};
}

void SetCallTimeout(grpc::ClientContext& context, absl::Duration timeout) {
  const int64_t millis = std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout));
  context.set_deadline(
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(millis, GPR_TIMESPAN)));
}

}  // namespace weightpath::agent
