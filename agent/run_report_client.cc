#include "agent/run_report_client.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/server_channel.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace weightpath::agent {

absl::StatusOr<std::unique_ptr<ReportClient>> ReportClient::Create(
    const std::string& server, const std::optional<TlsFiles>& tls) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, OpenServerChannel(server, tls));
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
