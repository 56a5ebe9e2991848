// Server reflection on the real binary, so grpcurl-style tools can list,
// describe and call every service without the .proto files. Both protocol
// versions are served: grpc.reflection.v1alpha (gRPC's own implementation)
// and grpc.reflection.v1 (server/api/reflection_v1.cc); the same tests run
// against each.
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/descriptor_database.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

struct V1Alpha {
  using Service = ::grpc::reflection::v1alpha::ServerReflection;
  using Request = ::grpc::reflection::v1alpha::ServerReflectionRequest;
  using Response = ::grpc::reflection::v1alpha::ServerReflectionResponse;
};

struct V1 {
  using Service = ::grpc::reflection::v1::ServerReflection;
  using Request = ::grpc::reflection::v1::ServerReflectionRequest;
  using Response = ::grpc::reflection::v1::ServerReflectionResponse;
};

// The services a reflection client must be able to list, describe and call.
const std::vector<std::string>& ServedServices() {
  static const std::vector<std::string> services = {
      "weightpath.v1.WeightPath",
      "weightpath.v1.FleetAdmin",
      "grpc.health.v1.Health",
      "grpc.reflection.v1alpha.ServerReflection",
      "grpc.reflection.v1.ServerReflection",
  };
  return services;
}

template <typename Protocol>
class ServerReflectionTest : public ::testing::Test {
 protected:
  using Request = typename Protocol::Request;
  using Response = typename Protocol::Response;

  void SetUp() override {
    auto started = ServerProcess::Start({});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    stub_ = Protocol::Service::NewStub(PlaintextChannel(server_->grpc_address()));
  }

  // Sends every request on one stream and returns the answers in order.
  std::vector<Response> AskAll(const std::vector<Request>& requests) {
    auto context = ContextWithDeadline();
    auto stream = stub_->ServerReflectionInfo(context.get());
    std::vector<Response> responses;
    for (const Request& request : requests) {
      EXPECT_TRUE(stream->Write(request));
      Response response;
      EXPECT_TRUE(stream->Read(&response));
      responses.push_back(std::move(response));
    }
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return responses;
  }

  Response Ask(const Request& request) { return AskAll({request}).front(); }

  static Request SymbolRequest(const std::string& symbol) {
    Request request;
    request.set_file_containing_symbol(symbol);
    return request;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<typename Protocol::Service::Stub> stub_;
};

using Protocols = ::testing::Types<V1Alpha, V1>;
TYPED_TEST_SUITE(ServerReflectionTest, Protocols);

TYPED_TEST(ServerReflectionTest, ListsEveryService) {
  typename TestFixture::Request request;
  request.set_list_services("");
  const auto response = this->Ask(request);
  std::set<std::string> services;
  for (const auto& service : response.list_services_response().service()) {
    services.insert(service.name());
  }
  EXPECT_THAT(services, ::testing::IsSupersetOf(ServedServices()));
}

// What grpcurl does before a call: fetch the file declaring the service (with
// its imports) and resolve every method's request and response types from
// those descriptors alone.
TYPED_TEST(ServerReflectionTest, DescribesEveryMethodOfEveryService) {
  for (const std::string& service_name : ServedServices()) {
    SCOPED_TRACE(service_name);
    const auto response = this->Ask(this->SymbolRequest(service_name));
    ASSERT_FALSE(response.has_error_response()) << response.error_response().error_message();
    google::protobuf::SimpleDescriptorDatabase database;
    for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
      google::protobuf::FileDescriptorProto file;
      ASSERT_TRUE(file.ParseFromString(bytes));
      ASSERT_TRUE(database.Add(file)) << file.name();
    }
    // Built lazily from the database: a missing import fails the lookup.
    google::protobuf::DescriptorPool pool(&database);
    const google::protobuf::ServiceDescriptor* service = pool.FindServiceByName(service_name);
    ASSERT_NE(service, nullptr);
    ASSERT_GT(service->method_count(), 0);
    for (int i = 0; i < service->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* method = service->method(i);
      EXPECT_NE(method->input_type(), nullptr) << method->full_name();
      EXPECT_NE(method->output_type(), nullptr) << method->full_name();
    }
  }
}

TYPED_TEST(ServerReflectionTest, DescribesTheResolveRequestMessage) {
  const auto response = this->Ask(this->SymbolRequest("weightpath.v1.ResolveWeightPathRequest"));
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

TYPED_TEST(ServerReflectionTest, SendsAFileWithItsImports) {
  typename TestFixture::Request request;
  request.set_file_by_filename("weightpath/v1/fleet_admin.proto");
  const auto response = this->Ask(request);
  std::vector<std::string> names;
  for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    names.push_back(file.name());
  }
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "weightpath/v1/fleet_admin.proto");
  EXPECT_THAT(names, ::testing::IsSupersetOf({"weightpath/v1/fleet.proto",
                                              "weightpath/v1/rollout.proto",
                                              "weightpath/v1/weightpath.proto",
                                              "google/protobuf/timestamp.proto",
                                              "google/protobuf/struct.proto"}));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size())
      << "a file was sent twice";
}

TYPED_TEST(ServerReflectionTest, AnswersUnknownNamesWithNotFoundAndKeepsTheStreamOpen) {
  typename TestFixture::Request unknown_file;
  unknown_file.set_file_by_filename("weightpath/v1/nothing.proto");
  typename TestFixture::Request list;
  list.set_list_services("");
  const auto responses = this->AskAll(
      {this->SymbolRequest("weightpath.v1.NoSuchThing"), unknown_file, list});
  ASSERT_EQ(responses.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(responses[i].has_error_response()) << responses[i].DebugString();
    EXPECT_EQ(responses[i].error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(responses[0].original_request().file_containing_symbol(), "weightpath.v1.NoSuchThing");
  EXPECT_GT(responses[2].list_services_response().service_size(), 0);
}

// The extension queries exist in v1 only (this project's v1alpha client
// messages are the subset its tests use).
class ServerReflectionV1Test : public ServerReflectionTest<V1> {};

TEST_F(ServerReflectionV1Test, AnswersExtensionQueries) {
  V1::Request numbers;
  numbers.set_all_extension_numbers_of_type("weightpath.v1.ResolveWeightPathRequest");
  V1::Request unknown_type;
  unknown_type.set_all_extension_numbers_of_type("weightpath.v1.NoSuchMessage");
  V1::Request unknown_extension;
  unknown_extension.mutable_file_containing_extension()->set_containing_type(
      "weightpath.v1.ResolveWeightPathRequest");
  unknown_extension.mutable_file_containing_extension()->set_extension_number(1000);
  const std::vector<V1::Response> responses =
      AskAll({numbers, unknown_type, unknown_extension});
  ASSERT_EQ(responses.size(), 3u);
  EXPECT_EQ(responses[0].all_extension_numbers_response().base_type_name(),
            "weightpath.v1.ResolveWeightPathRequest");
  EXPECT_EQ(responses[0].all_extension_numbers_response().extension_number_size(), 0);
  EXPECT_EQ(responses[1].error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(responses[2].error_response().error_code(), grpc::StatusCode::NOT_FOUND);
}

// gRPC 1.51's v1alpha service keeps adding to one response object, so each
// answer on a stream repeats the files of the ones before it; ours answers
// every request with its own files only.
TEST_F(ServerReflectionV1Test, EachAnswerOnAStreamCarriesItsOwnFilesOnly) {
  const std::vector<V1::Response> responses =
      AskAll({SymbolRequest("weightpath.v1.FleetAdmin"), SymbolRequest("grpc.health.v1.Health")});
  ASSERT_EQ(responses.size(), 2u);
  ASSERT_EQ(responses[1].file_descriptor_response().file_descriptor_proto_size(), 1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(responses[1].file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "grpc/health/v1/health.proto");
}

TEST_F(ServerReflectionV1Test, AnswersARequestThatAsksForNothingWithUnimplemented) {
  const V1::Response response = Ask(V1::Request());
  EXPECT_EQ(response.error_response().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace weightpath::server::testing
