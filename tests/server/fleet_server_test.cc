// The fleet registry and verification through the real weightpath-server on
// a real SQLite file: resolves are recorded, measurements turn into evidence,
// regressions are flagged, retries are recognised, bad reports are refused,
// and FleetAdmin wants an operator token.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;

class FleetServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    auto started = ServerProcess::Start(
        {"--store=sqlite:" + dir_.File("fleet.db"), "--admin_token_file=" + dir_.File("token"),
         "--fleet_refresh_interval=100ms", "--devices_seen_refresh_interval=100ms"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    channel_ = PlaintextChannel(server_->grpc_address());
    device_stub_ = v1::WeightPath::NewStub(channel_);
    admin_stub_ = v1::FleetAdmin::NewStub(channel_);
  }

  v1::ResolveWeightPathResponse ResolveOk(const v1::ResolveWeightPathRequest& request) {
    v1::ResolveWeightPathResponse response;
    const grpc::Status status = CallResolve(*device_stub_, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // The device as FleetAdmin reports it, once the write-behind flushed it.
  bool WaitForDevice(const std::string& device_id, v1::Device* device) {
    return Eventually([&] {
      v1::GetDeviceRequest request;
      request.set_device_id(device_id);
      auto context = AdminContext();
      return admin_stub_->GetDevice(context.get(), request, device).ok();
    });
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WeightPath::Stub> device_stub_;
  std::unique_ptr<v1::FleetAdmin::Stub> admin_stub_;
};

TEST_F(FleetServerTest, ResolveRecordsTheDeviceVisibleThroughFleetAdmin) {
  const v1::ResolveWeightPathResponse answer = ResolveOk(ArmRequest("arm-1"));

  v1::Device device;
  ASSERT_TRUE(WaitForDevice("arm-1", &device)) << server_->Log();
  EXPECT_EQ(device.hardware_class(), answer.hardware_class());
  EXPECT_EQ(device.path(), answer.weight_path().name());
  EXPECT_EQ(device.profile().cpu_model(), "Neoverse-N1");
  EXPECT_EQ(device.profile().arch(), "aarch64");
  EXPECT_EQ(device.artifact().sha256(), answer.artifact().sha256());
  EXPECT_EQ(device.policy_version(), answer.policy_version());
  EXPECT_EQ(device.labels().at("site"), "lab-a");
  EXPECT_GT(device.last_seen().seconds(), 0);

  v1::ListDevicesRequest list;
  list.set_label_selector("site=lab-a");
  v1::ListDevicesResponse listed;
  auto context = AdminContext();
  ASSERT_TRUE(admin_stub_->ListDevices(context.get(), list, &listed).ok());
  ASSERT_EQ(listed.devices_size(), 1);
  EXPECT_EQ(listed.devices(0).device_id(), "arm-1");

  list.set_label_selector("site=lab-b");
  context = AdminContext();
  ASSERT_TRUE(admin_stub_->ListDevices(context.get(), list, &listed).ok());
  EXPECT_EQ(listed.devices_size(), 0);

  v1::FleetSummaryResponse summary;
  context = AdminContext();
  ASSERT_TRUE(admin_stub_->FleetSummary(context.get(), v1::FleetSummaryRequest(), &summary).ok());
  EXPECT_EQ(summary.total_devices(), 1u);
  ASSERT_EQ(summary.cells_size(), 1);
  EXPECT_EQ(summary.cells(0).path(), answer.weight_path().name());

  // The devices-seen gauge is read back from the store.
  const std::string series = absl::StrCat("weightpath_devices_seen{hardware_class=\"",
                                          answer.hardware_class(), "\",path=\"",
                                          answer.weight_path().name(), "\"}");
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<std::string> metrics = HttpGet(server_->metrics_address(), "/metrics");
    if (!metrics.ok()) return false;
    absl::StatusOr<double> value = SampleValue(*metrics, series);
    return value.ok() && *value == 1;
  })) << series;
}

TEST_F(FleetServerTest, ThreeDevicesOfOneCpuModelVerifyAnUnverifiedPath) {
  const v1::ResolveWeightPathResponse before = ResolveOk(ArmRequest("arm-1"));
  ASSERT_FALSE(before.weight_path().verified()) << "the policy must not verify this path already";
  EXPECT_EQ(before.weight_path().verification().source(), v1::Verification::SOURCE_NONE);
  const std::string path = before.weight_path().name();

  for (const char* device : {"arm-1", "arm-2", "arm-3"}) {
    ResolveOk(ArmRequest(device));
    v1::Device ignored;
    ASSERT_TRUE(WaitForDevice(device, &ignored)) << device;
  }
  for (const char* device : {"arm-1", "arm-2"}) {
    v1::ReportMeasurementResponse response;
    const grpc::Status status = Report(
        *device_stub_, Measurement(absl::StrCat("key-", device), device, path, 31.5, 16), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_FALSE(response.duplicate());
    EXPECT_FALSE(response.measurement_id().empty());
  }
  // Two devices are short of the default three: still not verified.
  EXPECT_FALSE(Eventually([&] { return ResolveOk(ArmRequest("arm-1")).weight_path().verified(); },
                          absl::Milliseconds(500)));

  v1::ReportMeasurementResponse third;
  ASSERT_TRUE(Report(*device_stub_, Measurement("key-arm-3", "arm-3", path, 30.9, 16), &third).ok());

  v1::ResolveWeightPathResponse after;
  ASSERT_TRUE(Eventually([&] {
    after = ResolveOk(ArmRequest("arm-4"));
    return after.weight_path().verified();
  })) << server_->Log();
  EXPECT_EQ(after.weight_path().verification().source(), v1::Verification::SOURCE_FLEET);
  EXPECT_EQ(after.weight_path().verification().device_count(), 3u);

  v1::GetVerificationMatrixResponse matrix;
  auto context = AdminContext();
  ASSERT_TRUE(admin_stub_
                  ->GetVerificationMatrix(context.get(), v1::GetVerificationMatrixRequest(), &matrix)
                  .ok());
  // The fleet's one cell, and the paths the policy verified that no device
  // reported, each with no devices.
  const v1::VerificationCell* measured = nullptr;
  for (const v1::VerificationCell& cell : matrix.cells()) {
    if (cell.device_count() > 0) {
      EXPECT_EQ(measured, nullptr) << cell.DebugString();
      measured = &cell;
    } else {
      EXPECT_EQ(cell.verification().source(), v1::Verification::SOURCE_POLICY)
          << cell.DebugString();
      EXPECT_TRUE(cell.verified());
    }
  }
  ASSERT_NE(measured, nullptr);
  EXPECT_GT(matrix.cells_size(), 1);
  EXPECT_EQ(measured->path(), path);
  EXPECT_EQ(measured->hardware_class(), "arm64_cpu");
  EXPECT_EQ(measured->device_count(), 3u);
  EXPECT_TRUE(measured->verified());
  EXPECT_DOUBLE_EQ(measured->decode_tok_s().median(), 31.5);
  EXPECT_FALSE(matrix.policy_version().empty());
}

TEST_F(FleetServerTest, RegressingReportIsFlaggedCountedAndVisiblePerDevice) {
  const v1::ResolveWeightPathResponse answer = ResolveOk(AmxRequest("amx-1"));
  ASSERT_EQ(answer.weight_path().name(), "w4a8-amx");
  v1::Device device;
  ASSERT_TRUE(WaitForDevice("amx-1", &device));

  // The policy expects 86.6 tok/s at 24 threads on this CPU; 0.8 of it is 69.3.
  v1::ReportMeasurementResponse slow;
  ASSERT_TRUE(Report(*device_stub_, Measurement("slow-1", "amx-1", "w4a8-amx", 52.0, 24), &slow).ok());
  EXPECT_TRUE(slow.regression());
  EXPECT_THAT(slow.regression_reason(), HasSubstr("86.6"));

  v1::ReportMeasurementResponse fine;
  ASSERT_TRUE(Report(*device_stub_, Measurement("fine-1", "amx-1", "w4a8-amx", 85.0, 24), &fine).ok());
  EXPECT_FALSE(fine.regression());

  ASSERT_TRUE(WaitForDevice("amx-1", &device));
  EXPECT_EQ(device.regression_count(), 1u);
  EXPECT_THAT(device.last_regression(), HasSubstr("86.6"));

  absl::StatusOr<std::string> metrics = HttpGet(server_->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  const std::string labels = "{hardware_class=\"x86_cpu\",path=\"w4a8-amx\"}";
  EXPECT_EQ(SampleValue(*metrics, "weightpath_measurements_total" + labels).value_or(-1), 2);
  EXPECT_EQ(SampleValue(*metrics, "weightpath_measurement_regressions_total" + labels).value_or(-1),
            1);
}

TEST_F(FleetServerTest, AReportWithNoFigureToCompareSaysItWasNotJudgedAndIsCounted) {
  ASSERT_EQ(ResolveOk(AmxRequest("amx-1")).weight_path().name(), "w4a8-amx");
  v1::Device device;
  ASSERT_TRUE(WaitForDevice("amx-1", &device));

  // The policy's figure is for 24 threads; at 8 threads half its speed is
  // not a regression verdict either way, and the answer says so.
  v1::ReportMeasurementResponse unjudged;
  ASSERT_TRUE(
      Report(*device_stub_, Measurement("eight-1", "amx-1", "w4a8-amx", 43.3, 8), &unjudged).ok());
  EXPECT_FALSE(unjudged.regression());
  EXPECT_THAT(unjudged.regression_reason(), HasSubstr("not judged: no expected figure for CPU"));
  EXPECT_THAT(unjudged.regression_reason(), HasSubstr("at 8 threads"));

  absl::StatusOr<std::string> metrics = HttpGet(server_->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  const std::string labels = "{hardware_class=\"x86_cpu\",path=\"w4a8-amx\"}";
  EXPECT_EQ(SampleValue(*metrics, "weightpath_measurements_not_judged_total" + labels).value_or(-1),
            1);
  EXPECT_EQ(SampleValue(*metrics, "weightpath_measurement_regressions_total" + labels).value_or(-1),
            0);
  ASSERT_TRUE(WaitForDevice("amx-1", &device));
  EXPECT_EQ(device.regression_count(), 0u);
}

TEST_F(FleetServerTest, RetryWithTheSameKeyIsAcknowledgedOnce) {
  ResolveOk(AmxRequest("amx-1"));
  v1::Device device;
  ASSERT_TRUE(WaitForDevice("amx-1", &device));
  const v1::ReportMeasurementRequest request =
      Measurement("retry-key", "amx-1", "w4a8-amx", 84.0, 24);
  v1::ReportMeasurementResponse first;
  v1::ReportMeasurementResponse second;
  ASSERT_TRUE(Report(*device_stub_, request, &first).ok());
  ASSERT_TRUE(Report(*device_stub_, request, &second).ok());
  EXPECT_FALSE(first.duplicate());
  EXPECT_TRUE(second.duplicate());
  EXPECT_EQ(first.measurement_id(), second.measurement_id());

  absl::StatusOr<std::string> metrics = HttpGet(server_->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(SampleValue(*metrics, "weightpath_measurements_total{hardware_class=\"x86_cpu\","
                                  "path=\"w4a8-amx\"}")
                .value_or(-1),
            1);
}

TEST_F(FleetServerTest, BadReportsAreRefusedNamingTheFieldOrTheDevice) {
  v1::ReportMeasurementResponse response;
  v1::ReportMeasurementRequest negative = Measurement("k1", "amx-1", "w4a8-amx", -3, 24);
  grpc::Status status = Report(*device_stub_, negative, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("decode_tok_s"));

  v1::ReportMeasurementRequest no_key = Measurement("", "amx-1", "w4a8-amx", 80, 24);
  status = Report(*device_stub_, no_key, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("idempotency_key"));

  status = Report(*device_stub_, Measurement("k2", "never-resolved", "w4a8-amx", 80, 24), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("never-resolved"));
}

TEST_F(FleetServerTest, FleetAdminWantsTheOperatorToken) {
  v1::FleetSummaryResponse summary;
  auto anonymous = ContextWithDeadline();
  EXPECT_EQ(admin_stub_->FleetSummary(anonymous.get(), v1::FleetSummaryRequest(), &summary)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto wrong = AdminContext("not-the-token");
  EXPECT_EQ(admin_stub_->FleetSummary(wrong.get(), v1::FleetSummaryRequest(), &summary).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  auto right = AdminContext();
  EXPECT_TRUE(admin_stub_->FleetSummary(right.get(), v1::FleetSummaryRequest(), &summary).ok());

  v1::ListDevicesRequest bad_selector;
  bad_selector.set_label_selector("site in (");
  v1::ListDevicesResponse listed;
  auto context = AdminContext();
  const grpc::Status status = admin_stub_->ListDevices(context.get(), bad_selector, &listed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("label_selector"));
}

TEST_F(FleetServerTest, FleetAdminHealthIsServingWhileTheStoreAnswers) {
  grpc::Status status;
  EXPECT_EQ(CheckHealth(channel_, "weightpath.v1.FleetAdmin", &status),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(status.ok());
  absl::StatusOr<std::string> metrics = HttpGet(server_->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(SampleValue(*metrics, "weightpath_store_up").value_or(-1), 1);
}

}  // namespace
}  // namespace weightpath::server::testing
