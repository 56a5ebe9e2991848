#include "server/fleet_admin_service.h"

#include <utility>

#include "server/weightpath_service.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

// Copies the handler's answer out, or turns its error into the call's status.
template <typename Message>
grpc::Status Answer(absl::StatusOr<Message> result, Message* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

absl::Status FleetAdminService::Admit(const grpc::ServerContext& context, const char* method) const {
  absl::Status status = auth_->Authorize(context);
  if (!status.ok()) {
    spdlog::warn("FleetAdmin.{} from {} refused: {}", method, context.peer(), status.ToString());
    return status;
  }
  if (fleet_queries_ == nullptr) {
    return absl::FailedPreconditionError(
        "the server runs with --store=none: there is no fleet registry to read");
  }
  return absl::OkStatus();
}

grpc::Status FleetAdminService::ListDevices(grpc::ServerContext* context,
                                            const v1::ListDevicesRequest* request,
                                            v1::ListDevicesResponse* response) {
  if (absl::Status admitted = Admit(*context, "ListDevices"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return Answer(fleet_queries_->ListDevices(*request), response);
}

grpc::Status FleetAdminService::GetDevice(grpc::ServerContext* context,
                                          const v1::GetDeviceRequest* request,
                                          v1::Device* response) {
  if (absl::Status admitted = Admit(*context, "GetDevice"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return Answer(fleet_queries_->GetDevice(*request), response);
}

grpc::Status FleetAdminService::FleetSummary(grpc::ServerContext* context,
                                             const v1::FleetSummaryRequest* request,
                                             v1::FleetSummaryResponse* response) {
  if (absl::Status admitted = Admit(*context, "FleetSummary"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return Answer(fleet_queries_->FleetSummary(*request), response);
}

grpc::Status FleetAdminService::GetVerificationMatrix(
    grpc::ServerContext* context, const v1::GetVerificationMatrixRequest* /*request*/,
    v1::GetVerificationMatrixResponse* response) {
  if (absl::Status admitted = Admit(*context, "GetVerificationMatrix"); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  return Answer(fleet_queries_->VerificationMatrix(), response);
}

}  // namespace weightpath::server
