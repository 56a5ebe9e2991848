// TLS and mutual TLS with certificates made by `openssl` at test time: a
// throwaway CA, a server certificate for localhost/127.0.0.1, device
// certificates whose identities (CN, DNS SAN, URI SAN) bind device ids.
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"
#include "tests/server/test_ca.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;

class ServerTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto ca = TestCa::Create();
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = ca->release();
    ASSERT_TRUE(ca_->IssueClient("device", "/CN=device-7",
                                 "subjectAltName=DNS:device-7.fleet.example,"
                                 "URI:spiffe://fleet/device-7-uri\n")
                    .ok());
  }
  static void TearDownTestSuite() {
    delete ca_;
    ca_ = nullptr;
  }

  static std::string Cert(const std::string& name) { return ca_->File(name); }

  std::unique_ptr<ServerProcess> StartServer(bool mutual) {
    std::vector<std::string> args = {"--tls_cert=" + Cert("server.pem"),
                                     "--tls_key=" + Cert("server.key")};
    if (mutual) args.push_back("--client_ca=" + Cert("ca.pem"));
    auto server = ServerProcess::Start(args);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  static std::shared_ptr<grpc::Channel> TlsChannel(const std::string& address,
                                                   bool with_device_cert) {
    return ca_->Channel(address, with_device_cert ? "device" : "");
  }

  static grpc::Status Resolve(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& device_id) {
    auto stub = v1::WeightPath::NewStub(channel);
    v1::ResolveWeightPathResponse response;
    return CallResolve(*stub, AmxRequest(device_id), &response);
  }

  static TestCa* ca_;
};

TestCa* ServerTlsTest::ca_ = nullptr;

TEST_F(ServerTlsTest, DeviceCertificateResolvesForEachOfItsOwnIdentities) {
  auto server = StartServer(/*mutual=*/true);
  ASSERT_NE(server, nullptr);
  auto channel = TlsChannel(server->grpc_address(), /*with_device_cert=*/true);
  for (const std::string id :
       {"device-7", "device-7.fleet.example", "spiffe://fleet/device-7-uri"}) {
    const grpc::Status status = Resolve(channel, id);
    EXPECT_TRUE(status.ok()) << id << ": " << status.error_code() << " " << status.error_message();
  }
  EXPECT_THAT(server->Log(), HasSubstr("(mutual TLS)"));
}

TEST_F(ServerTlsTest, AnotherDeviceIdIsPermissionDenied) {
  auto server = StartServer(/*mutual=*/true);
  ASSERT_NE(server, nullptr);
  const grpc::Status status =
      Resolve(TlsChannel(server->grpc_address(), /*with_device_cert=*/true), "device-8");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("device_id \"device-8\""));
}

TEST_F(ServerTlsTest, NoClientCertificateIsRejectedAtTheHandshake) {
  auto server = StartServer(/*mutual=*/true);
  ASSERT_NE(server, nullptr);
  const grpc::Status status =
      Resolve(TlsChannel(server->grpc_address(), /*with_device_cert=*/false), "device-7");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(ServerTlsTest, PlaintextClientAgainstTlsServerFails) {
  auto server = StartServer(/*mutual=*/false);
  ASSERT_NE(server, nullptr);
  const grpc::Status status = Resolve(PlaintextChannel(server->grpc_address()), "device-7");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(ServerTlsTest, ServerOnlyTlsServesAnyDeviceIdWithoutClientCertificate) {
  auto server = StartServer(/*mutual=*/false);
  ASSERT_NE(server, nullptr);
  const grpc::Status status =
      Resolve(TlsChannel(server->grpc_address(), /*with_device_cert=*/false), "device-8");
  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
}

}  // namespace
}  // namespace weightpath::server::testing
