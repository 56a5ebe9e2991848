// gRPC client helpers shared by the process tests.
#pragma once

#include <memory>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace weightpath::server::testing {

inline std::shared_ptr<grpc::Channel> PlaintextChannel(const std::string& address) {
  return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
}

inline std::unique_ptr<grpc::ClientContext> ContextWithDeadline(int seconds = 10) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

inline grpc::Status CallResolve(v1::WeightPath::Stub& stub,
                                const v1::ResolveWeightPathRequest& request,
                                v1::ResolveWeightPathResponse* response) {
  auto context = ContextWithDeadline();
  return stub.ResolveWeightPath(context.get(), request, response);
}

// A valid request for an x86 Sapphire Rapids-like device.
inline v1::ResolveWeightPathRequest AmxRequest(const std::string& device_id = "device-1") {
  v1::ResolveWeightPathRequest request;
  request.set_device_id(device_id);
  v1::HardwareProfile* profile = request.mutable_profile();
  profile->set_arch("x86_64");
  profile->set_cpu_model("Intel(R) Xeon(R) Platinum 8480C");
  for (const char* flag : {"avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"}) {
    profile->add_cpu_flags(flag);
  }
  profile->set_n_logical(24);
  profile->set_accelerator("none");
  return request;
}

inline grpc::health::v1::HealthCheckResponse::ServingStatus CheckHealth(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
    grpc::Status* status) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  auto context = ContextWithDeadline();
  *status = stub->Check(context.get(), request, &response);
  return response.status();
}

}  // namespace weightpath::server::testing
