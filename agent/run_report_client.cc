#include "agent/run_report_client.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace weightpath::agent {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view field) {
  std::ifstream in(path);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": cannot read ", path, ": ", std::strerror(errno)));
  }
  std::stringstream contents;
  contents << in.rdbuf();
  if (contents.str().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(field, ": ", path, " is empty"));
  }
  return contents.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReportClient>> ReportClient::Create(
    const std::string& server, const std::optional<TlsFiles>& tls) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (tls.has_value()) {
    grpc::SslCredentialsOptions options;
    if (!tls->ca.empty()) { ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(tls->ca, "tls.ca")); }
    if (!tls->cert.empty()) {
      ASSIGN_OR_RETURN(options.pem_cert_chain, ReadPem(tls->cert, "tls.cert"));
      ASSIGN_OR_RETURN(options.pem_private_key, ReadPem(tls->key, "tls.key"));
    }
    credentials = grpc::SslCredentials(options);
  }
  auto channel = grpc::CreateChannel(server, credentials);
  return std::unique_ptr<ReportClient>(new ReportClient(v1::WeightPath::NewStub(channel)));
}

absl::StatusOr<v1::ReportOutcomeResponse> ReportClient::Report(
    const v1::ReportOutcomeRequest& request, absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  v1::ReportOutcomeResponse response;
  const grpc::Status status = stub_->ReportOutcome(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("ReportOutcome: ", status.error_message()));
  }
  return response;
}

std::string OutcomeIdempotencyKey(const v1::ReportOutcomeRequest& request) {
  return absl::StrCat(request.device_id(), "/", request.rollout_id(), "/",
                      v1::Outcome_Name(request.outcome()), "/", request.observed_at().seconds(), ".",
                      request.observed_at().nanos());
}

}  // namespace weightpath::agent
