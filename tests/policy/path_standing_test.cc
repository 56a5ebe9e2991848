// Where each path of a policy stands for one device (policy/path_standing.h):
// the default policy on the example profiles, and label and priority
// conditions that only keep a path from being chosen.
#include "policy/path_standing.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/profile_json.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

v1::HardwareProfile ExampleProfile(const std::string& name) {
  const std::string path = std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/" + name + ".json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<v1::HardwareProfile> profile = ParseProfileJson(text.str(), path);
  EXPECT_THAT(profile, IsOk());
  return profile.ok() ? *profile : v1::HardwareProfile();
}

std::map<std::string, PathStanding> ByPathId(const Policy& policy,
                                             const v1::HardwareProfile& profile,
                                             const Labels& labels = {}) {
  absl::StatusOr<std::vector<PathStanding>> standings = JudgePaths(policy, profile, labels);
  EXPECT_THAT(standings, IsOk());
  std::map<std::string, PathStanding> by_id;
  if (!standings.ok()) return by_id;
  EXPECT_EQ(standings->size(), policy.paths().size());
  for (PathStanding& standing : *standings) by_id[standing.path->id] = std::move(standing);
  return by_id;
}

TEST(PolicyPathStandingTest, SapphireRapidsGetsAmxForSpeedAndTinygemmForFidelity) {
  const std::shared_ptr<const Policy> policy = DefaultPolicy();
  std::map<std::string, PathStanding> paths =
      ByPathId(*policy, ExampleProfile("intel-sapphire-rapids"));

  EXPECT_EQ(paths["w4a8-amx"].standing, PathStandingKind::kChosen);
  EXPECT_THAT(paths["w4a8-amx"].chosen_for, ElementsAre(v1::PRIORITY_SPEED));
  EXPECT_THAT(paths["w4a8-amx"].reason, HasSubstr("rule x86-amx-speed at priority speed"));
  EXPECT_EQ(paths["w4a16-tinygemm-x86"].standing, PathStandingKind::kChosen);
  EXPECT_THAT(paths["w4a16-tinygemm-x86"].chosen_for, ElementsAre(v1::PRIORITY_FIDELITY));

  // The GPU, phone and ARM builds: the hardware class rules them out, and
  // the reason names the rule, what it needs and what this device is.
  EXPECT_EQ(paths["bf16-cuda"].standing, PathStandingKind::kIncompatible);
  EXPECT_EQ(paths["bf16-cuda"].reason,
            "rule cuda-discrete-bf16 needs hardware_class cuda_discrete; this device is x86_cpu");
  EXPECT_EQ(paths["w4a16-tinygemm-arm64"].standing, PathStandingKind::kIncompatible);
  EXPECT_THAT(paths["export-qnn-w8a16"].reason, HasSubstr("npu_phone"));
  for (const auto& [id, standing] : paths) {
    EXPECT_FALSE(standing.reason.empty()) << id;
    if (standing.standing != PathStandingKind::kChosen) {
      EXPECT_THAT(standing.chosen_for, IsEmpty());
    }
  }
}

TEST(PolicyPathStandingTest, WithoutAmxTheAmxBuildIsIncompatibleNamingTheFlags) {
  const std::shared_ptr<const Policy> policy = DefaultPolicy();
  std::map<std::string, PathStanding> paths = ByPathId(*policy, ExampleProfile("amd-zen4"));

  EXPECT_EQ(paths["w4a16-tinygemm-x86"].standing, PathStandingKind::kChosen);
  EXPECT_THAT(paths["w4a16-tinygemm-x86"].chosen_for,
              ElementsAre(v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY));
  EXPECT_EQ(paths["w4a8-amx"].standing, PathStandingKind::kIncompatible);
  EXPECT_EQ(paths["w4a8-amx"].reason,
            "rule x86-amx-speed needs one of the CPU flags amx_tile, amx_bf16; this device has "
            "none of them");
}

TEST(PolicyPathStandingTest, AGpuWithBf16HasTheFp16BuildExcludedBySupportsBf16) {
  const std::shared_ptr<const Policy> policy = DefaultPolicy();
  std::map<std::string, PathStanding> paths = ByPathId(*policy, ExampleProfile("rtx-4090"));
  EXPECT_EQ(paths["bf16-cuda"].standing, PathStandingKind::kChosen);
  EXPECT_EQ(paths["fp16-cuda"].standing, PathStandingKind::kIncompatible);
  EXPECT_EQ(paths["fp16-cuda"].reason,
            "rule cuda-discrete-fp16 needs supports_bf16 false; this device has true");
}

constexpr char kChoicePolicy[] = R"(schema: 1
paths:
  - {id: fast, name: w4a8-amx, quantization: gptq, group_size: 128, bits_per_weight: 4.25, rationale: fast}
  - {id: faithful, name: w4a16-tinygemm, quantization: cpu_int4, group_size: 128, bits_per_weight: 4.25, rationale: faithful}
  - {id: canary, name: w4a16-canary, quantization: cpu_int4, group_size: 128, bits_per_weight: 4.25, rationale: canary}
  - {id: spare, name: spare, quantization: cpu_int4, group_size: 128, bits_per_weight: 4.25, rationale: unrouted}
rules:
  - name: canary-ring
    match: {labels: {ring: canary}, hardware_class: x86_cpu}
    path: canary
  - name: everything-faithful
    match: {priority: fidelity}
    path: faithful
  - name: x86-fast
    match: {hardware_class: x86_cpu}
    path: fast
  - name: rest
    path: faithful
)";

v1::HardwareProfile PlainX86() {
  v1::HardwareProfile profile;
  profile.set_arch("x86_64");
  profile.set_accelerator("none");
  profile.add_cpu_flags("avx2");
  return profile;
}

TEST(PolicyPathStandingTest, LabelsPrioritiesAndEarlierRulesMakeAPathCompatibleNotChosen) {
  absl::StatusOr<std::shared_ptr<const Policy>> policy = LoadPolicy(kChoicePolicy, "choice.yaml");
  ASSERT_THAT(policy, IsOk());
  std::map<std::string, PathStanding> paths = ByPathId(**policy, PlainX86());

  EXPECT_EQ(paths["fast"].standing, PathStandingKind::kChosen);
  EXPECT_THAT(paths["fast"].chosen_for, ElementsAre(v1::PRIORITY_SPEED));
  EXPECT_EQ(paths["faithful"].standing, PathStandingKind::kChosen);
  EXPECT_THAT(paths["faithful"].chosen_for, ElementsAre(v1::PRIORITY_FIDELITY));

  EXPECT_EQ(paths["canary"].standing, PathStandingKind::kCompatible);
  EXPECT_EQ(paths["canary"].reason,
            "rule canary-ring routes here, but at priority speed it needs the labels ring=canary; "
            "at priority fidelity it needs the labels ring=canary");
  EXPECT_EQ(paths["spare"].standing, PathStandingKind::kIncompatible);
  EXPECT_EQ(paths["spare"].reason, "no rule of the policy routes to it");

  // With the label, the canary is chosen at both priorities and the rest
  // are compatible, each saying which earlier rule wins.
  Labels canary;
  canary["ring"] = "canary";
  paths = ByPathId(**policy, PlainX86(), canary);
  EXPECT_EQ(paths["canary"].standing, PathStandingKind::kChosen);
  EXPECT_THAT(paths["canary"].chosen_for, ElementsAre(v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY));
  EXPECT_EQ(paths["fast"].standing, PathStandingKind::kCompatible);
  EXPECT_EQ(paths["fast"].reason,
            "rule x86-fast routes here, but at priority speed the earlier rule canary-ring "
            "chooses canary; at priority fidelity the earlier rule canary-ring chooses canary");
  EXPECT_EQ(paths["faithful"].standing, PathStandingKind::kCompatible);
  EXPECT_EQ(paths["faithful"].reason,
            "rule everything-faithful routes here, but it does not apply at priority speed; at "
            "priority fidelity the earlier rule canary-ring chooses canary");
}

TEST(PolicyPathStandingTest, AProfileThatCannotBeClassifiedIsRefusedAsEvaluateRefusesIt) {
  v1::HardwareProfile riscv;
  riscv.set_arch("riscv64");
  riscv.set_accelerator("none");
  EXPECT_THAT(JudgePaths(*DefaultPolicy(), riscv, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("profile.arch")));
}

}  // namespace
}  // namespace weightpath::policy
