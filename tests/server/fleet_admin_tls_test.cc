// Operator identity under mutual TLS: the same CA signs device and operator
// certificates; only the one carrying the configured OU may call FleetAdmin.
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

class FleetAdminTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    const std::string dir = certs_->path();
    WriteFileOrDie(dir + "/server.ext",
                   "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    WriteFileOrDie(dir + "/client.ext", "extendedKeyUsage=clientAuth\n");
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string sign =
        " -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 ";
    const std::string script = absl::StrCat(
        "set -e; cd ", dir, "; exec >openssl.log 2>&1;",
        "openssl req -x509 ", ec, " -keyout ca.key -out ca.pem -days 2 -subj /CN=fleet-ca;",
        "openssl req ", ec, " -keyout server.key -out server.csr -subj /CN=localhost;",
        "openssl x509 -req -in server.csr", sign, "-out server.pem -extfile server.ext;",
        "openssl req ", ec, " -keyout device.key -out device.csr -subj /CN=amx-1/OU=devices;",
        "openssl x509 -req -in device.csr", sign, "-out device.pem -extfile client.ext;",
        "openssl req ", ec,
        " -keyout operator.key -out operator.csr -subj /CN=alice/OU=weightpath-operators;",
        "openssl x509 -req -in operator.csr", sign, "-out operator.pem -extfile client.ext;");
    ASSERT_EQ(std::system(("bash -c '" + script + "'").c_str()), 0)
        << ReadFileOrDie(dir + "/openssl.log");
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  void SetUp() override {
    auto started = ServerProcess::Start(
        {"--tls_cert=" + Cert("server.pem"), "--tls_key=" + Cert("server.key"),
         "--client_ca=" + Cert("ca.pem"), "--admin_identity=ou=weightpath-operators",
         "--store=sqlite:" + data_.File("fleet.db")});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  static std::string Cert(const std::string& name) { return certs_->File(name); }

  std::unique_ptr<v1::FleetAdmin::Stub> AdminStubAs(const std::string& who) const {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFileOrDie(Cert("ca.pem"));
    options.pem_private_key = ReadFileOrDie(Cert(who + ".key"));
    options.pem_cert_chain = ReadFileOrDie(Cert(who + ".pem"));
    grpc::ChannelArguments arguments;
    arguments.SetSslTargetNameOverride("localhost");
    return v1::FleetAdmin::NewStub(grpc::CreateCustomChannel(
        server_->grpc_address(), grpc::SslCredentials(options), arguments));
  }

  static TempDir* certs_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
};

TempDir* FleetAdminTlsTest::certs_ = nullptr;

TEST_F(FleetAdminTlsTest, DeviceCertificateIsRefusedOperatorCertificateIsServed) {
  v1::FleetSummaryResponse summary;
  auto as_device = ContextWithDeadline();
  const grpc::Status refused =
      AdminStubAs("device")->FleetSummary(as_device.get(), v1::FleetSummaryRequest(), &summary);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("weightpath-operators"));

  auto as_operator = ContextWithDeadline();
  const grpc::Status served =
      AdminStubAs("operator")->FleetSummary(as_operator.get(), v1::FleetSummaryRequest(), &summary);
  EXPECT_TRUE(served.ok()) << served.error_message();
}

TEST_F(FleetAdminTlsTest, ADeviceReportsOnlyForItself) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFileOrDie(Cert("ca.pem"));
  options.pem_private_key = ReadFileOrDie(Cert("device.key"));
  options.pem_cert_chain = ReadFileOrDie(Cert("device.pem"));
  grpc::ChannelArguments arguments;
  arguments.SetSslTargetNameOverride("localhost");
  auto stub = v1::WeightPath::NewStub(grpc::CreateCustomChannel(
      server_->grpc_address(), grpc::SslCredentials(options), arguments));
  v1::ReportMeasurementResponse response;
  const grpc::Status status =
      Report(*stub, Measurement("k-1", "someone-else", "w4a8-amx", 80, 24), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("device_id"));
}

}  // namespace
}  // namespace weightpath::server::testing
