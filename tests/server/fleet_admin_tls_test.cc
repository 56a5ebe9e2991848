// Operator identity under mutual TLS: the same CA signs device and operator
// certificates; only the one carrying the configured OU may call FleetAdmin.
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/server/test_ca.h"

namespace weightpath::server::testing {
namespace {

class FleetAdminTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto ca = TestCa::Create();
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = ca->release();
    ASSERT_TRUE(ca_->IssueClient("device", "/CN=amx-1/OU=devices").ok());
    ASSERT_TRUE(ca_->IssueClient("operator", "/CN=alice/OU=weightpath-operators").ok());
    // One trailing space: printed as "OU=weightpath-operators\\ " in the subject.
    ASSERT_TRUE(ca_->IssueClient("lookalike", "/CN=mallory/OU=weightpath-operators ").ok());
  }
  static void TearDownTestSuite() {
    delete ca_;
    ca_ = nullptr;
  }

  void SetUp() override {
    auto started = ServerProcess::Start(
        {"--tls_cert=" + Cert("server.pem"), "--tls_key=" + Cert("server.key"),
         "--client_ca=" + Cert("ca.pem"), "--admin_identity=ou=weightpath-operators",
         "--store=sqlite:" + data_.File("fleet.db")});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  static std::string Cert(const std::string& name) { return ca_->File(name); }

  std::unique_ptr<v1::FleetAdmin::Stub> AdminStubAs(const std::string& who) const {
    return v1::FleetAdmin::NewStub(ca_->Channel(server_->grpc_address(), who));
  }

  static TestCa* ca_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
};

TestCa* FleetAdminTlsTest::ca_ = nullptr;

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

TEST_F(FleetAdminTlsTest, AnOuThatDiffersOnlyByAnEscapedSpaceIsRefused) {
  v1::FleetSummaryResponse summary;
  auto context = ContextWithDeadline();
  const grpc::Status refused =
      AdminStubAs("lookalike")->FleetSummary(context.get(), v1::FleetSummaryRequest(), &summary);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
}

TEST_F(FleetAdminTlsTest, ADeviceReportsOnlyForItself) {
  auto stub = v1::WeightPath::NewStub(ca_->Channel(server_->grpc_address(), "device"));
  v1::ReportMeasurementResponse response;
  const grpc::Status status =
      Report(*stub, Measurement("k-1", "someone-else", "w4a8-amx", 80, 24), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("device_id"));
}

}  // namespace
}  // namespace weightpath::server::testing
