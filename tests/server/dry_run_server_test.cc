// ResolveWeightPathRequest.dry_run through the real weightpath-server on a
// real SQLite file and a real PostgreSQL: a dry run gets the answer a device
// would, to the byte, and the registry never hears of it.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/store/store_backends.h"

namespace weightpath::server::testing {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using store::testing::Backend;
using store::testing::BackendName;
using store::testing::FreshDatabaseUrl;

class DryRunServerTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
    ASSERT_TRUE(url.ok()) << url.status();
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    auto started = ServerProcess::Start({"--store=" + *url,
                                         "--admin_token_file=" + dir_.File("token"),
                                         "--fleet_refresh_interval=100ms",
                                         "--registry_flush_period=50ms"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    auto channel = PlaintextChannel(server_->grpc_address());
    device_stub_ = v1::WeightPath::NewStub(channel);
    admin_stub_ = v1::FleetAdmin::NewStub(channel);
  }

  v1::ResolveWeightPathResponse ResolveOk(const v1::ResolveWeightPathRequest& request) {
    v1::ResolveWeightPathResponse response;
    const grpc::Status status = CallResolve(*device_stub_, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::WeightPath::Stub> device_stub_;
  std::unique_ptr<v1::FleetAdmin::Stub> admin_stub_;
};

TEST_P(DryRunServerTest, ADryRunIsAnsweredAsADeviceIsButNeverRegistered) {
  v1::ResolveWeightPathRequest dry = ArmRequest("laptop-of-an-operator");
  dry.set_dry_run(true);
  // The first call takes the full path; the same profile again is answered
  // from the profile memo, which must not record it either.
  const v1::ResolveWeightPathResponse first = ResolveOk(dry);
  const v1::ResolveWeightPathResponse again = ResolveOk(dry);
  v1::ResolveWeightPathRequest dry_unchanged = dry;
  dry_unchanged.set_known_decision_etag(first.decision_etag());
  const v1::ResolveWeightPathResponse unchanged = ResolveOk(dry_unchanged);
  EXPECT_TRUE(unchanged.unchanged());

  // A real device with the same profile, resolved after the dry runs: once
  // it is in the registry, anything queued before it was written too.
  const v1::ResolveWeightPathResponse real = ResolveOk(ArmRequest("arm-real"));
  EXPECT_TRUE(MessageDifferencer::Equals(first, real))
      << first.ShortDebugString() << "\n" << real.ShortDebugString();
  EXPECT_TRUE(MessageDifferencer::Equals(again, real));
  EXPECT_EQ(first.decision_etag(), real.decision_etag());
  EXPECT_EQ(first.SerializeAsString(), real.SerializeAsString());

  ASSERT_TRUE(Eventually([&] {
    v1::GetDeviceRequest get;
    get.set_device_id("arm-real");
    v1::Device device;
    auto context = AdminContext();
    return admin_stub_->GetDevice(context.get(), get, &device).ok();
  })) << server_->Log();

  v1::GetDeviceRequest get;
  get.set_device_id("laptop-of-an-operator");
  v1::Device device;
  auto context = AdminContext();
  const grpc::Status missing = admin_stub_->GetDevice(context.get(), get, &device);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND) << missing.error_message();

  v1::ListDevicesResponse listed;
  context = AdminContext();
  ASSERT_TRUE(admin_stub_->ListDevices(context.get(), v1::ListDevicesRequest(), &listed).ok());
  ASSERT_EQ(listed.devices_size(), 1);
  EXPECT_EQ(listed.devices(0).device_id(), "arm-real");

  v1::FleetSummaryResponse summary;
  context = AdminContext();
  ASSERT_TRUE(
      admin_stub_->FleetSummary(context.get(), v1::FleetSummaryRequest(), &summary).ok());
  EXPECT_EQ(summary.total_devices(), 1u);
}

// A device's own dry run leaves its record as its last real resolve made it.
TEST_P(DryRunServerTest, ADryRunOfAKnownDeviceLeavesItsRecordAlone) {
  v1::ResolveWeightPathRequest real = ArmRequest("arm-7");
  ResolveOk(real);
  v1::Device before;
  ASSERT_TRUE(Eventually([&] {
    v1::GetDeviceRequest get;
    get.set_device_id("arm-7");
    auto context = AdminContext();
    return admin_stub_->GetDevice(context.get(), get, &before).ok();
  })) << server_->Log();

  v1::ResolveWeightPathRequest dry = real;
  dry.set_dry_run(true);
  (*dry.mutable_labels())["site"] = "lab-z";
  dry.set_agent_version("dry-run-agent");
  ResolveOk(dry);
  // A later real resolve is written after the dry run would have been.
  v1::ResolveWeightPathRequest marker = ArmRequest("arm-marker");
  ResolveOk(marker);
  ASSERT_TRUE(Eventually([&] {
    v1::GetDeviceRequest get;
    get.set_device_id("arm-marker");
    v1::Device device;
    auto context = AdminContext();
    return admin_stub_->GetDevice(context.get(), get, &device).ok();
  })) << server_->Log();

  v1::GetDeviceRequest get;
  get.set_device_id("arm-7");
  v1::Device after;
  auto context = AdminContext();
  ASSERT_TRUE(admin_stub_->GetDevice(context.get(), get, &after).ok());
  EXPECT_EQ(after.labels().at("site"), "lab-a");
  EXPECT_EQ(after.agent_version(), before.agent_version());
  EXPECT_EQ(after.last_seen().seconds(), before.last_seen().seconds());
}

INSTANTIATE_TEST_SUITE_P(Backends, DryRunServerTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const auto& info) { return BackendName(info.param); });

}  // namespace
}  // namespace weightpath::server::testing
