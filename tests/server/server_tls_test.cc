// TLS and mutual TLS with certificates made by `openssl` at test time: a
// throwaway CA, a server certificate for localhost/127.0.0.1, device
// certificates whose identities (CN, DNS SAN, URI SAN) bind device ids.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
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

std::string ReadOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// As cert-manager and kubelet do: the new file is written beside the old
// one and renamed over it, so a reader never sees half a certificate.
void ReplaceFile(const std::string& path, const std::string& contents) {
  WriteFileOrDie(path + ".new", contents);
  ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0) << path;
}

TEST_F(ServerTlsTest, RenewedCertificatesAndANewClientCaAreServedWithoutARestart) {
  absl::StatusOr<std::unique_ptr<TestCa>> next_ca = TestCa::Create();
  ASSERT_TRUE(next_ca.ok()) << next_ca.status();
  ASSERT_TRUE((*next_ca)->IssueClient("device", "/CN=device-7").ok());

  TempDir files;
  WriteFileOrDie(files.File("tls.crt"), ReadOrDie(Cert("server.pem")));
  WriteFileOrDie(files.File("tls.key"), ReadOrDie(Cert("server.key")));
  WriteFileOrDie(files.File("ca.crt"), ReadOrDie(Cert("ca.pem")));
  auto server = ServerProcess::Start({"--tls_cert=" + files.File("tls.crt"),
                                      "--tls_key=" + files.File("tls.key"),
                                      "--client_ca=" + files.File("ca.crt"),
                                      "--reload_interval=1s"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->grpc_address();
  ASSERT_TRUE(Resolve(TlsChannel(address, /*with_device_cert=*/true), "device-7").ok());

  absl::StatusOr<std::string> metrics = HttpGet((*server)->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("weightpath_tls_certificate_expiry_timestamp_seconds{certificate=\"server\"}"));
  EXPECT_THAT(*metrics, HasSubstr("weightpath_tls_certificate_expiry_timestamp_seconds{certificate=\"client_ca\"}"));

  // Everything replaced by another CA's: server certificate, key and the
  // client CA bundle. Only devices of the new CA get in from then on.
  ReplaceFile(files.File("tls.key"), ReadOrDie((*next_ca)->File("server.key")));
  ReplaceFile(files.File("tls.crt"), ReadOrDie((*next_ca)->File("server.pem")));
  ReplaceFile(files.File("ca.crt"), ReadOrDie((*next_ca)->File("ca.pem")));
  grpc::Status with_new_ca;
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  do {
    // A fresh channel each time: a connection keeps the handshake it made.
    with_new_ca = Resolve((*next_ca)->Channel(address, "device"), "device-7");
    if (with_new_ca.ok()) break;
    absl::SleepFor(absl::Milliseconds(200));
  } while (absl::Now() < deadline);
  EXPECT_TRUE(with_new_ca.ok()) << with_new_ca.error_code() << " " << with_new_ca.error_message()
                                << "\n" << (*server)->Log();
  EXPECT_FALSE(Resolve(TlsChannel(address, /*with_device_cert=*/true), "device-7").ok())
      << "a device of the old CA, against a server certificate it does not trust";
}

}  // namespace
}  // namespace weightpath::server::testing
