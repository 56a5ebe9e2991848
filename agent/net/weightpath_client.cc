#include "agent/net/weightpath_client.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "agent/base/local_file.h"
#include "common/control_characters.h"
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

// Whether a string field of `message` needs escaping. With `fix` (the same
// message, mutable), every such field is escaped in place; without, the
// walk stops at the first.
bool HasStringsToEscape(const google::protobuf::Message& message,
                        google::protobuf::Message* fix) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection& reflection = *message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection.ListFields(message, &fields);
  bool found = false;
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      // Map entries are messages too: their keys and values are walked here.
      if (field->is_repeated()) {
        for (int i = 0; i < reflection.FieldSize(message, field); ++i) {
          const bool inner = HasStringsToEscape(
              reflection.GetRepeatedMessage(message, field, i),
              fix == nullptr ? nullptr : reflection.MutableRepeatedMessage(fix, field, i));
          found = found || inner;
          if (found && fix == nullptr) return true;
        }
      } else {
        const bool inner = HasStringsToEscape(
            reflection.GetMessage(message, field),
            fix == nullptr ? nullptr : reflection.MutableMessage(fix, field));
        found = found || inner;
      }
    } else if (field->type() == FieldDescriptor::TYPE_STRING) {
      const int count = field->is_repeated() ? reflection.FieldSize(message, field) : 1;
      for (int i = 0; i < count; ++i) {
        std::string scratch;
        const std::string& value =
            field->is_repeated()
                ? reflection.GetRepeatedStringReference(message, field, i, &scratch)
                : reflection.GetStringReference(message, field, &scratch);
        if (!HasControlCharacters(value)) continue;
        found = true;
        if (fix == nullptr) return true;
        std::string escaped = ControlEscaped(value);
        if (field->is_repeated()) {
          reflection.SetRepeatedString(fix, field, i, std::move(escaped));
        } else {
          reflection.SetString(fix, field, std::move(escaped));
        }
      }
    }
    if (found && fix == nullptr) return true;
  }
  return found;
}

// One unary call with its deadline and its status conversion. The request
// is copied only when a string in it must be escaped.
template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> Call(absl::string_view name, v1::WeightPath::Stub& stub, Method method,
                              const Request& request, absl::Duration timeout) {
  std::optional<Request> escaped;
  if (HasStringsToEscape(request, nullptr)) {
    escaped = request;
    EscapeOutgoingStrings(&*escaped);
  }
  grpc::ClientContext context;
  SetCallTimeout(context, timeout);
  Response response;
  const grpc::Status status =
      (stub.*method)(&context, escaped.has_value() ? *escaped : request, &response);
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

bool EscapeOutgoingStrings(google::protobuf::Message* message) {
  return HasStringsToEscape(*message, message);
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
