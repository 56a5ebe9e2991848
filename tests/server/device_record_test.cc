// The registry record a resolve leaves: the direct encoding must be byte for
// byte what encoding the filled v1::Device gives, or every device's body
// would look changed and be rewritten at its next resolve.
#include "server/fleet/device_record.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/config_watcher.h"
#include "server/resolve/resolver.h"
#include "store/time_convert.h"
#include "tests/server/example_requests.h"

namespace weightpath::server {
namespace {

const absl::Time kNow = absl::FromUnixMicros(1'796'000'000'123'456);

struct Resolved {
  v1::ResolveWeightPathResponse decided;
  v1::ResolveWeightPathResponse per_call;
};

Resolved ResolveWithEmbeddedPolicy(const v1::ResolveWeightPathRequest& request) {
  static const auto snapshot = [] {
    auto loaded = LoadSnapshot({});
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return *loaded;
  }();
  Resolved resolved;
  ResolveSummary summary;
  absl::StatusOr<ResolvedDecision> decision = Decide(request, *snapshot, &summary);
  EXPECT_TRUE(decision.ok()) << decision.status();
  FillDecidedPart(*decision, *snapshot, &resolved.decided);
  FillPerCallPart(*decision, &resolved.per_call);
  return resolved;
}

void ExpectSameRecord(const v1::ResolveWeightPathRequest& request, const Resolved& resolved) {
  v1::Device filled;
  FillDeviceRecord(request, resolved.decided, resolved.per_call, kNow, filled);
  const store::EncodedDevice expected = store::EncodeDevice(filled);
  const store::EncodedDevice direct =
      EncodeDeviceRecord(request, resolved.decided, resolved.per_call, kNow);
  EXPECT_EQ(direct.body, expected.body) << request.device_id();
  EXPECT_EQ(direct.fingerprint, expected.fingerprint) << request.device_id();
  EXPECT_EQ(direct.device_id, expected.device_id);
  EXPECT_EQ(direct.hardware_class, expected.hardware_class);
  EXPECT_EQ(direct.path, expected.path);
  EXPECT_EQ(direct.cpu_model, expected.cpu_model);
  EXPECT_EQ(direct.policy_version, expected.policy_version);
  EXPECT_EQ(direct.agent_version, expected.agent_version);
  EXPECT_EQ(direct.assigned_key, expected.assigned_key);
  EXPECT_FALSE(direct.assigned_key.empty());
  EXPECT_EQ(direct.first_seen_us, 0);
  EXPECT_EQ(direct.last_seen_us, store::ToMicros(kNow));
  EXPECT_EQ(direct.profile, expected.profile) << request.device_id();
  // The profile as the device sent it: the wire bytes the server received.
  const std::string wire = request.profile().SerializeAsString();
  const store::EncodedDevice as_sent =
      EncodeDeviceRecord(request, resolved.decided, resolved.per_call, kNow, wire);
  EXPECT_EQ(as_sent.profile, wire);
  EXPECT_EQ(as_sent.fingerprint, expected.fingerprint);
  v1::HardwareProfile kept;
  ASSERT_TRUE(kept.ParseFromString(direct.profile));
  EXPECT_EQ(kept.SerializeAsString(), wire);
  EXPECT_EQ(filled.requested_priority(), request.priority());
}

TEST(DeviceRecordTest, DirectEncodingMatchesTheFilledRecordForEveryExample) {
  for (const v1::ResolveWeightPathRequest& base : testing::ExampleProfileRequests()) {
    for (v1::Priority priority : {v1::PRIORITY_UNSPECIFIED, v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
      v1::ResolveWeightPathRequest request = base;
      request.set_priority(priority);
      ExpectSameRecord(request, ResolveWithEmbeddedPolicy(request));
    }
  }
}

TEST(DeviceRecordTest, LabelsInAnyOrderEmptyValuesAndEmptyFlagsEncodeAsProtobufDoes) {
  v1::ResolveWeightPathRequest request = testing::ExampleProfileRequests().front();
  for (const char* key : {"zone", "site", "a", "workload", "empty"}) {
    (*request.mutable_labels())[key] = std::string(key) == "empty" ? "" : "value";
  }
  (*request.mutable_labels())[""] = "empty key";
  request.mutable_profile()->add_cpu_flags("");
  request.set_agent_version("");
  ExpectSameRecord(request, ResolveWithEmbeddedPolicy(request));
}

TEST(DeviceRecordTest, PerCallArtifactAndRolloutWinOverTheDecidedPart) {
  const v1::ResolveWeightPathRequest request = testing::ExampleProfileRequests().front();
  Resolved resolved = ResolveWithEmbeddedPolicy(request);
  resolved.per_call.mutable_artifact()->set_uri("https://artifacts.example/rollout.tar");
  resolved.per_call.mutable_artifact()->set_sha256(std::string(64, 'c'));
  resolved.per_call.mutable_artifact()->set_size_bytes(300'000'000'000);
  resolved.per_call.mutable_rollout()->set_rollout_id("fidelity-agentic");
  ExpectSameRecord(request, resolved);

  v1::Device filled;
  FillDeviceRecord(request, resolved.decided, resolved.per_call, kNow, filled);
  EXPECT_EQ(filled.artifact().uri(), "https://artifacts.example/rollout.tar");
  EXPECT_EQ(filled.rollout_id(), "fidelity-agentic");
  EXPECT_EQ(filled.path(), resolved.decided.weight_path().name());
  EXPECT_EQ(filled.profile().cpu_flags_size(), request.profile().cpu_flags_size());
}

TEST(DeviceRecordTest, SameDeviceResolvedLaterHasTheSameFingerprint) {
  const v1::ResolveWeightPathRequest request = testing::ExampleProfileRequests().back();
  const Resolved resolved = ResolveWithEmbeddedPolicy(request);
  const store::EncodedDevice now = EncodeDeviceRecord(request, resolved.decided, resolved.per_call, kNow);
  const store::EncodedDevice later =
      EncodeDeviceRecord(request, resolved.decided, resolved.per_call, kNow + absl::Hours(6));
  EXPECT_EQ(now.fingerprint, later.fingerprint);
  EXPECT_NE(now.last_seen_us, later.last_seen_us);
}

// A profile past the store's bound is left out, wherever its bytes come
// from, so the write-behind queue never holds one.
TEST(DeviceRecordTest, AProfileOverTheBoundIsNotKept) {
  v1::ResolveWeightPathRequest request = testing::ExampleProfileRequests().front();
  const Resolved resolved = ResolveWithEmbeddedPolicy(request);
  request.mutable_profile()->add_probe_notes(std::string(store::kMaxStoredProfileBytes, 'n'));
  EXPECT_EQ(EncodeDeviceRecord(request, resolved.decided, resolved.per_call, kNow).profile, "");
  EXPECT_EQ(EncodeDeviceRecord(request, resolved.decided, resolved.per_call, kNow,
                               request.profile().SerializeAsString())
                .profile,
            "");
  v1::Device filled;
  FillDeviceRecord(request, resolved.decided, resolved.per_call, kNow, filled);
  EXPECT_FALSE(filled.has_hardware_profile());
}

}  // namespace
}  // namespace weightpath::server
