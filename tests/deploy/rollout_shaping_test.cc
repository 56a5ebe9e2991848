#include "deploy/rollout_shaping.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "deploy/rollout_bucket.h"
#include "deploy/rollout_evaluation.h"
#include "deploy/rollout_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_fixtures.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::deploy {
namespace {

using ::testing::HasSubstr;
using ::testing::Contains;
using ::weightpath::deploy::testing::Arm64Profile;
using ::weightpath::deploy::testing::Epoch;
using ::weightpath::deploy::testing::FidelityForAgentic;
using ::weightpath::deploy::testing::MakeLabels;
using ::weightpath::deploy::testing::X86Profile;
using ::weightpath::testing::IsOk;

using HC = policy::HardwareClass;

const policy::Policy& DefaultPolicy() {
  static const std::shared_ptr<const policy::Policy> policy = policy::DefaultPolicy();
  return *policy;
}

// A started rollout moved straight to `stage` (the tests here are about
// shaping, not about how it got there).
v1::Rollout AtStage(v1::Rollout spec, uint32_t stage, absl::Time created) {
  absl::StatusOr<v1::Rollout> started = StartRollout(spec, DefaultPolicy(), created);
  EXPECT_THAT(started, IsOk());
  EnterStage(stage, created, &*started);
  return *started;
}

// A device id whose bucket for `rollout_id` lies in [low, high).
std::string DeviceInBuckets(const std::string& rollout_id, uint32_t low, uint32_t high) {
  for (int i = 0;; ++i) {
    std::string id = absl::StrCat("device-", i);
    uint32_t bucket = RolloutBucket(rollout_id, id);
    if (bucket >= low && bucket < high) return id;
  }
}

TEST(DeployRolloutShapingTest, MembershipFollowsStateAndStage) {
  v1::Rollout rollout = AtStage(FidelityForAgentic("fid"), 1, Epoch());  // 10%
  Labels agentic = MakeLabels({{"workload", "agentic"}});
  std::string inside = DeviceInBuckets("fid", 0, 1000);
  std::string outside = DeviceInBuckets("fid", 1000, 10000);
  EXPECT_TRUE(IsMember(rollout, inside, agentic, HC::kX86Cpu));
  EXPECT_FALSE(IsMember(rollout, outside, agentic, HC::kX86Cpu));
  EXPECT_FALSE(IsMember(rollout, inside, MakeLabels({{"workload", "chat"}}), HC::kX86Cpu));

  rollout.set_state(v1::ROLLOUT_STATE_PAUSED);
  EXPECT_EQ(MembershipPercent(rollout), 10u);
  EXPECT_TRUE(IsMember(rollout, inside, agentic, HC::kX86Cpu));
  rollout.set_state(v1::ROLLOUT_STATE_COMPLETED);
  EXPECT_EQ(MembershipPercent(rollout), 100u);
  EXPECT_TRUE(IsMember(rollout, outside, agentic, HC::kX86Cpu));
  for (v1::RolloutState gone : {v1::ROLLOUT_STATE_ABORTED, v1::ROLLOUT_STATE_ROLLED_BACK}) {
    rollout.set_state(gone);
    EXPECT_EQ(MembershipPercent(rollout), 0u);
    EXPECT_FALSE(IsMember(rollout, inside, agentic, HC::kX86Cpu));
  }
}

TEST(DeployRolloutShapingTest, SetPriorityReEvaluatesThePolicy) {
  v1::Rollout rollout = AtStage(FidelityForAgentic("fid"), 3, Epoch());
  Labels agentic = MakeLabels({{"workload", "agentic"}});
  absl::StatusOr<RolloutResolution> shaped = ResolveWithRollouts(
      DefaultPolicy(), X86Profile(/*amx=*/true), v1::PRIORITY_SPEED, agentic, "dev-1", {rollout});
  ASSERT_THAT(shaped, IsOk());
  EXPECT_EQ(shaped->decision.path->name, "w4a16-tinygemm");
  EXPECT_EQ(shaped->decision.effective_priority, v1::PRIORITY_FIDELITY);
  EXPECT_EQ(shaped->attribution.rollout_id(), "fid");
  EXPECT_EQ(shaped->attribution.bucket(), RolloutBucket("fid", "dev-1"));
  EXPECT_EQ(shaped->attribution.stage(), 3u);

  absl::StatusOr<RolloutResolution> unshaped =
      ResolveWithRollouts(DefaultPolicy(), X86Profile(true), v1::PRIORITY_SPEED,
                          MakeLabels({{"workload", "chat"}}), "dev-1", {rollout});
  ASSERT_THAT(unshaped, IsOk());
  EXPECT_EQ(unshaped->decision.path->name, "w4a8-amx");
  EXPECT_EQ(unshaped->attribution.rollout_id(), "");
  EXPECT_THAT(unshaped->considered, Contains(HasSubstr("fid (precedence 0, ROLLOUT_STATE_PROGRESSING): selector does not match")));
}

TEST(DeployRolloutShapingTest, PrecedenceIsHigherFirstThenOlderThenSmallerId) {
  Labels agentic = MakeLabels({{"workload", "agentic"}});
  v1::Rollout speed = FidelityForAgentic("speed-back");
  speed.mutable_action()->set_set_priority(v1::PRIORITY_SPEED);
  v1::Rollout fidelity = FidelityForAgentic("fidelity");

  // Same precedence, fidelity created first: fidelity wins.
  std::vector<v1::Rollout> rollouts = {AtStage(speed, 3, Epoch() + absl::Hours(1)),
                                       AtStage(fidelity, 3, Epoch())};
  ShapedRequest shaped =
      ShapeDecision(rollouts, "dev-9", agentic, HC::kX86Cpu, v1::PRIORITY_SPEED);
  ASSERT_TRUE(shaped.shaped_by.has_value());
  EXPECT_EQ(shaped.shaped_by->attribution.rollout_id(), "fidelity");
  EXPECT_EQ(shaped.effective_priority, v1::PRIORITY_FIDELITY);

  // Higher precedence beats age.
  rollouts[0].set_precedence(5);
  shaped = ShapeDecision(rollouts, "dev-9", agentic, HC::kX86Cpu, v1::PRIORITY_FIDELITY);
  EXPECT_EQ(shaped.shaped_by->attribution.rollout_id(), "speed-back");
  EXPECT_EQ(shaped.effective_priority, v1::PRIORITY_SPEED);

  // Equal precedence and creation time: the smaller id, whatever the order.
  std::vector<v1::Rollout> tied = {AtStage(speed, 3, Epoch()), AtStage(fidelity, 3, Epoch())};
  EXPECT_EQ(ShapeDecision(tied, "dev-9", agentic, HC::kX86Cpu, v1::PRIORITY_SPEED)
                .shaped_by->attribution.rollout_id(),
            "fidelity");
  std::swap(tied[0], tied[1]);
  EXPECT_EQ(ShapeDecision(tied, "dev-9", agentic, HC::kX86Cpu, v1::PRIORITY_SPEED)
                .shaped_by->attribution.rollout_id(),
            "fidelity");
}

TEST(DeployRolloutShapingTest, ANonMemberFallsThroughToTheNextRollout) {
  Labels agentic = MakeLabels({{"workload", "agentic"}});
  v1::Rollout narrow = FidelityForAgentic("narrow");
  narrow.set_precedence(10);
  narrow.mutable_action()->set_pin_path("w4a16-tinygemm-x86");
  v1::Rollout wide = FidelityForAgentic("wide");
  std::string device = DeviceInBuckets("narrow", 100, 10000);  // outside narrow's 1%
  std::vector<v1::Rollout> rollouts = {AtStage(narrow, 0, Epoch()), AtStage(wide, 3, Epoch())};
  ShapedRequest shaped = ShapeDecision(rollouts, device, agentic, HC::kX86Cpu, v1::PRIORITY_SPEED);
  ASSERT_TRUE(shaped.shaped_by.has_value());
  EXPECT_EQ(shaped.shaped_by->attribution.rollout_id(), "wide");
  EXPECT_THAT(shaped.considered, Contains(HasSubstr("narrow (precedence 10, ROLLOUT_STATE_PROGRESSING): bucket")));
}

TEST(DeployRolloutShapingTest, AbortedRolloutsShapeNothing) {
  Labels agentic = MakeLabels({{"workload", "agentic"}});
  v1::Rollout rollout = AtStage(FidelityForAgentic("fid"), 3, Epoch());
  rollout.set_state(v1::ROLLOUT_STATE_ABORTED);
  absl::StatusOr<RolloutResolution> shaped = ResolveWithRollouts(
      DefaultPolicy(), X86Profile(true), v1::PRIORITY_SPEED, agentic, "dev-1", {rollout});
  ASSERT_THAT(shaped, IsOk());
  EXPECT_EQ(shaped->decision.path->name, "w4a8-amx");
  EXPECT_EQ(shaped->attribution.rollout_id(), "");
  EXPECT_THAT(shaped->considered, Contains(HasSubstr("shapes nothing in this state")));
}

TEST(DeployRolloutShapingTest, PinPathAppliesOnlyWhereThePolicyRoutesItToTheClass) {
  v1::Rollout pin = FidelityForAgentic("pin-tinygemm");
  pin.mutable_action()->set_pin_path("w4a16-tinygemm-x86");
  std::vector<v1::Rollout> rollouts = {AtStage(pin, 3, Epoch())};
  Labels agentic = MakeLabels({{"workload", "agentic"}});

  absl::StatusOr<RolloutResolution> x86 = ResolveWithRollouts(
      DefaultPolicy(), X86Profile(true), v1::PRIORITY_SPEED, agentic, "dev-1", rollouts);
  ASSERT_THAT(x86, IsOk());
  EXPECT_EQ(x86->decision.path->id, "w4a16-tinygemm-x86");
  EXPECT_EQ(x86->attribution.rollout_id(), "pin-tinygemm");

  // An x86 kernel build never lands on an ARM board, whatever the selector.
  absl::StatusOr<RolloutResolution> arm = ResolveWithRollouts(
      DefaultPolicy(), Arm64Profile(), v1::PRIORITY_SPEED, agentic, "dev-1", rollouts);
  ASSERT_THAT(arm, IsOk());
  EXPECT_EQ(arm->decision.path->id, "w4a16-tinygemm-arm64");
  EXPECT_EQ(arm->attribution.rollout_id(), "");
  EXPECT_THAT(arm->considered,
              Contains(HasSubstr("no policy rule gives path 'w4a16-tinygemm-x86' to arm64_cpu")));
}

TEST(DeployRolloutShapingTest, PinArtifactAppliesToDevicesOnThatPathName) {
  v1::Rollout pin = FidelityForAgentic("tinygemm-v2");
  auto* pinned = pin.mutable_action()->mutable_pin_artifact();
  pinned->set_path("w4a16-tinygemm");
  pinned->mutable_artifact()->set_uri("https://weights.example/tinygemm-v2.tar");
  pinned->mutable_artifact()->set_sha256(std::string(64, 'c'));
  pinned->mutable_artifact()->set_version("v2");
  std::vector<v1::Rollout> rollouts = {AtStage(pin, 3, Epoch())};
  Labels agentic = MakeLabels({{"workload", "agentic"}});

  absl::StatusOr<RolloutResolution> no_amx = ResolveWithRollouts(
      DefaultPolicy(), X86Profile(false), v1::PRIORITY_SPEED, agentic, "dev-1", rollouts);
  ASSERT_THAT(no_amx, IsOk());
  ASSERT_TRUE(no_amx->pinned_artifact.has_value());
  EXPECT_EQ(no_amx->pinned_artifact->version(), "v2");
  EXPECT_EQ(no_amx->attribution.rollout_id(), "tinygemm-v2");

  absl::StatusOr<RolloutResolution> amx = ResolveWithRollouts(
      DefaultPolicy(), X86Profile(true), v1::PRIORITY_SPEED, agentic, "dev-1", rollouts);
  ASSERT_THAT(amx, IsOk());
  EXPECT_FALSE(amx->pinned_artifact.has_value());
  EXPECT_EQ(amx->decision.path->name, "w4a8-amx");
  EXPECT_THAT(amx->considered, Contains(HasSubstr("the device's path is 'w4a8-amx'")));
}

TEST(DeployRolloutShapingTest, UnclassifiableProfileIsInvalidArgument) {
  v1::HardwareProfile riscv;
  riscv.set_arch("riscv64");
  riscv.set_accelerator("none");
  EXPECT_THAT(ResolveWithRollouts(DefaultPolicy(), riscv, v1::PRIORITY_SPEED, Labels(), "dev-1",
                                  {}),
              ::weightpath::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                              HasSubstr("profile.arch")));
}

}  // namespace
}  // namespace weightpath::deploy
