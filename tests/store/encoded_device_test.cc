#include "store/encoded_device.h"

#include <string>

#include "gtest/gtest.h"
#include "store/time_convert.h"
#include "tests/store/store_backends.h"

namespace weightpath::store::testing {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

v1::Device Record() {
  return MakeDevice("dev-a", "x86_cpu", "w4a8-amx", "Intel(R) Xeon(R) Platinum 8480C", kT0);
}

TEST(EncodedDevice, LabelInsertionOrderGivesTheSameBytes) {
  v1::Device forward = Record();
  v1::Device backward = Record();
  for (int i = 0; i < 20; ++i) (*forward.mutable_labels())["k" + std::to_string(i)] = "v";
  for (int i = 19; i >= 0; --i) (*backward.mutable_labels())["k" + std::to_string(i)] = "v";
  const EncodedDevice a = EncodeDevice(forward);
  const EncodedDevice b = EncodeDevice(backward);
  EXPECT_EQ(a.body, b.body);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
}

TEST(EncodedDevice, TimesAndRegressionFiguresAreLeftToTheirColumns) {
  v1::Device later = Record();
  *later.mutable_last_seen() = ToTimestamp(kT0 + absl::Hours(3));
  *later.mutable_first_seen() = ToTimestamp(kT0 - absl::Hours(3));
  later.set_regression_count(4);
  later.set_last_regression("decode 40 tok/s below 0.8 x 86.6");
  const EncodedDevice body = EncodeDevice(later);
  EXPECT_EQ(body.fingerprint, EncodeDevice(Record()).fingerprint);

  v1::Device parsed;
  ASSERT_TRUE(parsed.ParseFromString(body.body));
  EXPECT_FALSE(parsed.has_last_seen());
  EXPECT_FALSE(parsed.has_first_seen());
  EXPECT_EQ(parsed.regression_count(), 0u);
  EXPECT_EQ(parsed.last_regression(), "");
  v1::Device expected = later;
  expected.clear_last_seen();
  expected.clear_first_seen();
  expected.clear_regression_count();
  expected.clear_last_regression();
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
}

TEST(EncodedDevice, ColumnsComeFromTheRecord) {
  v1::Device device = Record();
  *device.mutable_first_seen() = ToTimestamp(kT0 - absl::Hours(1));
  const EncodedDevice encoded = EncodeDevice(device);
  EXPECT_EQ(encoded.device_id, "dev-a");
  EXPECT_EQ(encoded.hardware_class, "x86_cpu");
  EXPECT_EQ(encoded.path, "w4a8-amx");
  EXPECT_EQ(encoded.cpu_model, "Intel(R) Xeon(R) Platinum 8480C");
  EXPECT_EQ(encoded.first_seen_us, ToMicros(kT0 - absl::Hours(1)));
  EXPECT_EQ(encoded.last_seen_us, ToMicros(kT0));
  EXPECT_EQ(EncodeDevice(Record()).first_seen_us, 0);  // not given
}

TEST(EncodedDevice, EveryOtherFieldChangesTheFingerprint) {
  const int64_t original = EncodeDevice(Record()).fingerprint;
  const auto changed = [&](auto edit) {
    v1::Device device = Record();
    edit(device);
    return EncodeDevice(device).fingerprint != original;
  };
  EXPECT_TRUE(changed([](v1::Device& d) { d.set_path("w4a16-tinygemm"); }));
  EXPECT_TRUE(changed([](v1::Device& d) { d.set_hardware_class("arm64_cpu"); }));
  EXPECT_TRUE(changed([](v1::Device& d) { (*d.mutable_labels())["workload"] = "agentic"; }));
  EXPECT_TRUE(changed([](v1::Device& d) { d.mutable_profile()->add_cpu_flags("amx_tile"); }));
  EXPECT_TRUE(changed([](v1::Device& d) { d.mutable_artifact()->set_sha256(std::string(64, 'b')); }));
  EXPECT_TRUE(changed([](v1::Device& d) { d.set_policy_version("sha256:fedcba9876543210"); }));
  EXPECT_TRUE(changed([](v1::Device& d) { d.set_agent_version("0.2.0"); }));
  EXPECT_TRUE(changed([](v1::Device& d) { d.set_effective_priority(v1::PRIORITY_FIDELITY); }));
  EXPECT_TRUE(changed([](v1::Device& d) { d.set_rollout_id("fidelity-agentic"); }));
  EXPECT_TRUE(changed([](v1::Device& d) { d.set_model("Spark-X2.5-7B"); }));
}

TEST(EncodedDevice, TheProfileIsAColumnAndItsFingerprintIgnoresFreeRam) {
  v1::Device device = Record();
  v1::HardwareProfile& profile = *device.mutable_hardware_profile();
  profile.set_arch("x86_64");
  profile.set_cpu_model("Intel(R) Xeon(R) Platinum 8480C");
  profile.set_ram_total_bytes(uint64_t{512} << 30);
  profile.set_ram_available_bytes(uint64_t{400} << 30);
  profile.add_cpu_flags("amx_tile");
  device.set_requested_priority(v1::PRIORITY_FIDELITY);
  const EncodedDevice encoded = EncodeDevice(device);
  EXPECT_EQ(encoded.profile, profile.SerializeAsString());
  // Not in the body: the column holds it.
  v1::Device body;
  ASSERT_TRUE(body.ParseFromString(encoded.body));
  EXPECT_FALSE(body.has_hardware_profile());
  EXPECT_EQ(body.requested_priority(), v1::PRIORITY_FIDELITY);
  // Without a profile the fingerprint is the body's alone, as before.
  EXPECT_EQ(EncodeDevice(Record()).fingerprint,
            static_cast<int64_t>(StableHash64(EncodeDevice(Record()).body)));
  EXPECT_NE(encoded.fingerprint, static_cast<int64_t>(StableHash64(encoded.body)));

  const auto fingerprint_after = [&](auto edit) {
    v1::Device changed = device;
    edit(*changed.mutable_hardware_profile());
    return EncodeDevice(changed).fingerprint;
  };
  EXPECT_EQ(fingerprint_after([](v1::HardwareProfile& p) { p.set_ram_available_bytes(17); }),
            encoded.fingerprint);
  EXPECT_NE(fingerprint_after([](v1::HardwareProfile& p) { p.set_ram_total_bytes(1); }),
            encoded.fingerprint);
  EXPECT_NE(fingerprint_after([](v1::HardwareProfile& p) { p.set_supports_bf16(true); }),
            encoded.fingerprint);
  EXPECT_NE(fingerprint_after([](v1::HardwareProfile& p) { p.add_cpu_flags("amx_bf16"); }),
            encoded.fingerprint);
  // Beyond the bound the registry keeps no profile.
  v1::Device huge = device;
  huge.mutable_hardware_profile()->add_probe_notes(std::string(kMaxStoredProfileBytes, 'n'));
  EXPECT_EQ(EncodeDevice(huge).profile, "");
}

TEST(StableHash64, IsFixedAcrossBuildsAndRuns) {
  // Stored fingerprints outlive the binary: a new value here means every
  // device's body is rewritten once after an upgrade.
  EXPECT_EQ(StableHash64(""), StableHash64(std::string()));
  EXPECT_EQ(StableHash64("weightpath"), 17201798567938463254u);
  EXPECT_NE(StableHash64("weightpath"), StableHash64("weightpatH"));
  EXPECT_NE(StableHash64(std::string(8, '\0')), StableHash64(std::string(9, '\0')));
}

}  // namespace
}  // namespace weightpath::store::testing
