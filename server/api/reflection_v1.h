// grpc.reflection.v1.ServerReflection, which gRPC 1.51 does not ship (its
// libgrpc++_reflection serves only v1alpha, registered in main.cc). Current
// grpcurl, Postman and the gRPC CLIs ask for v1 first; with both served, old
// and new tools can list and call every service without the .proto files.
//
// Answers from google::protobuf::DescriptorPool::generated_pool(), as the
// v1alpha implementation does: a file is sent with its transitive
// dependencies, an unknown name gets an error_response with NOT_FOUND, and
// the stream stays open for the next request.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpcpp/impl/server_builder_option.h"

namespace weightpath::server {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  // `pool` must outlive the service; tests pass their own.
  explicit ReflectionV1Service(
      const google::protobuf::DescriptorPool* pool =
          google::protobuf::DescriptorPool::generated_pool());

  // The names list_services answers with: the server's own list of
  // registered services, owned by the grpc::Server and complete once it has
  // started. Until it is set, list_services answers NOT_FOUND.
  void SetServiceList(const std::vector<std::string>* services);

  // One answer, as the stream sends it (valid_host and original_request
  // filled in).
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& request) const;

  // The names in the service list that the pool cannot describe (their .proto
  // file is not linked into the binary): reflection clients could list them
  // but not call them.
  std::vector<std::string> UndescribedServices() const;

  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

 private:
  class Reactor;

  const google::protobuf::DescriptorPool* pool_;
  // Written once from ServerBuilder::BuildAndStart, after the server has
  // started accepting calls, so a reflection call can race it.
  std::atomic<const std::vector<std::string>*> services_{nullptr};
};

// A ServerBuilder option that registers a ReflectionV1Service on the server
// being built and hands it the server's service list once it has started:
//   builder.SetOption(ReflectionV1ServerOption());
std::unique_ptr<grpc::ServerBuilderOption> ReflectionV1ServerOption();

}  // namespace weightpath::server
