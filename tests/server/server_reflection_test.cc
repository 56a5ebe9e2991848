// Server reflection on the real binary, so grpcurl-style tools can list and
// call the services without the .proto files.
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

namespace reflection = ::grpc::reflection::v1alpha;

class ServerReflectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = ServerProcess::Start({});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    stub_ = reflection::ServerReflection::NewStub(PlaintextChannel(server_->grpc_address()));
  }

  reflection::ServerReflectionResponse Ask(const reflection::ServerReflectionRequest& request) {
    auto context = ContextWithDeadline();
    auto stream = stub_->ServerReflectionInfo(context.get());
    reflection::ServerReflectionResponse response;
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    EXPECT_TRUE(stream->Read(&response));
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<reflection::ServerReflection::Stub> stub_;
};

TEST_F(ServerReflectionTest, ListsTheWeightPathHealthAndReflectionServices) {
  reflection::ServerReflectionRequest request;
  request.set_list_services("");
  const reflection::ServerReflectionResponse response = Ask(request);
  std::set<std::string> services;
  for (const auto& service : response.list_services_response().service()) {
    services.insert(service.name());
  }
  EXPECT_THAT(services, ::testing::IsSupersetOf({"weightpath.v1.WeightPath",
                                                 "grpc.health.v1.Health",
                                                 "grpc.reflection.v1alpha.ServerReflection"}));
}

TEST_F(ServerReflectionTest, DescribesTheResolveRequestMessage) {
  reflection::ServerReflectionRequest request;
  request.set_file_containing_symbol("weightpath.v1.ResolveWeightPathRequest");
  const reflection::ServerReflectionResponse response = Ask(request);
  ASSERT_GT(response.file_descriptor_response().file_descriptor_proto_size(), 0)
      << response.DebugString();
  bool found = false;
  for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    for (const auto& message : file.message_type()) {
      found = found || (file.package() == "weightpath.v1" &&
                        message.name() == "ResolveWeightPathRequest");
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace weightpath::server::testing
