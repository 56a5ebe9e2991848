// A plan's pass over the registry, in-process against a real SQLite store.
#include "server/api/policy_plan.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "store/call_deadline.h"
#include "store/store.h"
#include "common/proto_time.h"
#include "tests/server/server_process.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::server {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

v1::Device Registered(int i) {
  v1::Device device;
  device.set_device_id(absl::StrCat("dev-", 10000 + i));
  device.set_hardware_class("x86_cpu");
  device.set_path("w4a8-amx");
  device.set_model("Spark-X2.5-1.7B");
  *device.mutable_last_seen() = ToProtoTime(absl::FromUnixSeconds(1'800'000'000));
  v1::HardwareProfile& profile = *device.mutable_hardware_profile();
  profile.set_arch("x86_64");
  profile.set_cpu_model("Intel(R) Xeon(R) Platinum 8480+");
  for (const char* flag : {"avx2", "avx512f", "amx_bf16", "amx_tile", "amx_int8"}) {
    profile.add_cpu_flags(flag);
  }
  profile.set_accelerator("none");
  return device;
}

// Two viewers' plans over a large registry held both operator store workers
// until their passes ended, their callers long gone.
TEST(PolicyPlanTest, APassOverTheRegistryStopsAtTheCallsDeadline) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<store::FleetStore>> opened =
      store::OpenFleetStore("sqlite:" + dir.File("fleet.db"));
  ASSERT_THAT(opened, IsOk());
  store::FleetStore& fleet = **opened;
  std::vector<v1::Device> devices;
  for (int i = 0; i < static_cast<int>(store::kMaxPageSize) + 5; ++i) devices.push_back(Registered(i));
  ASSERT_THAT(fleet.UpsertDevices(devices), IsOk());

  const std::shared_ptr<const policy::Policy> policy = policy::DefaultPolicy();
  const PlanSide side{policy.get(), {}};
  {
    // Past already: the pass stops after its first page.
    const store::ScopedCallDeadline deadline(absl::Now() - absl::Seconds(1));
    EXPECT_THAT(PlanDecisions(side, {side}, PlanScope{}, fleet, absl::Now()),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         HasSubstr("ran out of the call's deadline after 1000 devices")));
  }
  absl::StatusOr<std::vector<v1::PlanPolicyResponse>> whole =
      PlanDecisions(side, {side}, PlanScope{}, fleet, absl::Now());
  ASSERT_THAT(whole, IsOk());
  ASSERT_EQ(whole->size(), 1u);
  EXPECT_EQ((*whole)[0].devices_evaluated(), store::kMaxPageSize + 5);
  EXPECT_EQ((*whole)[0].devices_unchanged(), store::kMaxPageSize + 5);
}

}  // namespace
}  // namespace weightpath::server
