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

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;

class ServerTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    const std::string dir = certs_->path();
    WriteFileOrDie(dir + "/server.ext",
                   "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    WriteFileOrDie(dir + "/device.ext",
                   "subjectAltName=DNS:device-7.fleet.example,URI:spiffe://fleet/device-7-uri\n"
                   "extendedKeyUsage=clientAuth\n");
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string script = absl::StrCat(
        "set -e; cd ", dir, "; exec >openssl.log 2>&1;",
        "openssl req -x509 ", ec, " -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca;",
        "openssl req ", ec, " -keyout server.key -out server.csr -subj /CN=localhost;",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial",
        " -out server.pem -days 2 -extfile server.ext;",
        "openssl req ", ec, " -keyout device.key -out device.csr -subj /CN=device-7;",
        "openssl x509 -req -in device.csr -CA ca.pem -CAkey ca.key -CAcreateserial",
        " -out device.pem -days 2 -extfile device.ext;");
    ASSERT_EQ(std::system(("bash -c '" + script + "'").c_str()), 0)
        << ReadFileOrDie(dir + "/openssl.log");
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  static std::string Cert(const std::string& name) { return certs_->File(name); }

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
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFileOrDie(Cert("ca.pem"));
    if (with_device_cert) {
      options.pem_private_key = ReadFileOrDie(Cert("device.key"));
      options.pem_cert_chain = ReadFileOrDie(Cert("device.pem"));
    }
    grpc::ChannelArguments arguments;
    arguments.SetSslTargetNameOverride("localhost");
    return grpc::CreateCustomChannel(address, grpc::SslCredentials(options), arguments);
  }

  static grpc::Status Resolve(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& device_id) {
    auto stub = v1::WeightPath::NewStub(channel);
    v1::ResolveWeightPathResponse response;
    return CallResolve(*stub, AmxRequest(device_id), &response);
  }

  static TempDir* certs_;
};

TempDir* ServerTlsTest::certs_ = nullptr;

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
