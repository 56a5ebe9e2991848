// A fleet of 10,000 simulated devices, in-process with an injected clock,
// taking a fidelity rollout for workload=agentic through its stages.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "deploy/cohort_outcomes.h"
#include "deploy/operator_actions.h"
#include "deploy/rollout_bucket.h"
#include "deploy/rollout_evaluation.h"
#include "deploy/rollout_shaping.h"
#include "deploy/rollout_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_fixtures.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::deploy {
namespace {

using ::testing::HasSubstr;
using ::weightpath::deploy::testing::Arm64Profile;
using ::weightpath::deploy::testing::CudaProfile;
using ::weightpath::deploy::testing::Epoch;
using ::weightpath::deploy::testing::FidelityForAgentic;
using ::weightpath::deploy::testing::JetsonProfile;
using ::weightpath::deploy::testing::X86Profile;
using ::weightpath::testing::IsOk;

constexpr int kFleetSize = 10000;
constexpr char kRolloutId[] = "fidelity-agentic";
const absl::Duration kTick = absl::Minutes(15);

// What a device says about its tasks each tick (the engine harness's counts).
struct TaskMix {
  uint32_t completed = 0;
  uint32_t undone = 0;
};

struct Resolved {
  std::string path_id;
  v1::Priority priority = v1::PRIORITY_UNSPECIFIED;
  std::string rollout_id;
  bool operator==(const Resolved& other) const {
    return path_id == other.path_id && priority == other.priority &&
           rollout_id == other.rollout_id;
  }
};

struct SimDevice {
  std::string id;
  Labels labels;
  v1::HardwareProfile profile;
  policy::HardwareClass hardware_class;
  bool agentic = false;
  Resolved current;
  Resolved baseline;  // before any rollout existed
  DeviceOutcomes on_rollout_build;
  DeviceOutcomes on_other_build;
};

class FleetSimulation {
 public:
  FleetSimulation() : policy_(policy::DefaultPolicy()), now_(Epoch()) {
    for (int i = 0; i < kFleetSize; ++i) {
      SimDevice device;
      device.id = absl::StrFormat("edge-%05d", i);
      device.agentic = i % 10 < 3;
      device.labels["workload"] = device.agentic ? "agentic" : "chat";
      switch ((i / 10) % 5) {
        case 0:
          device.profile = X86Profile(/*amx=*/true);
          break;
        case 1:
          device.profile = X86Profile(/*amx=*/false);
          break;
        case 2:
          device.profile = Arm64Profile();
          break;
        case 3:
          device.profile = CudaProfile();
          break;
        default:
          device.profile = JetsonProfile();
          break;
      }
      device.hardware_class = *policy::ClassifyHardware(device.profile);
      device.on_rollout_build = {device.id, kRolloutId};
      device.on_other_build = {device.id, ""};
      devices_.push_back(std::move(device));
    }
    ResolveAll();
    for (SimDevice& device : devices_) device.baseline = device.current;
  }

  void Start(const v1::Rollout& spec) {
    absl::StatusOr<v1::Rollout> started = StartRollout(spec, *policy_, now_);
    ASSERT_THAT(started, IsOk());
    rollouts_ = {*started};
  }

  // Every device resolves; one whose decision changed restarts its engine
  // and reports how that went, about the build it now runs.
  void ResolveAll() {
    for (SimDevice& device : devices_) {
      absl::StatusOr<RolloutResolution> resolution = ResolveWithRollouts(
          *policy_, device.profile, v1::PRIORITY_SPEED, device.labels, device.id, rollouts_);
      ASSERT_THAT(resolution, IsOk());
      Resolved now{resolution->decision.path->id, resolution->decision.effective_priority,
                   resolution->attribution.rollout_id()};
      if (now == device.current) continue;
      device.current = now;
      Report(device, v1::OUTCOME_ENGINE_STARTED, 0, 0);
    }
  }

  // Agentic devices report their task counts; members and control differ.
  void ReportTasks(TaskMix members, TaskMix control) {
    for (SimDevice& device : devices_) {
      if (!device.agentic) continue;
      TaskMix mix = device.current.rollout_id == kRolloutId ? members : control;
      Report(device, v1::OUTCOME_TASKS, mix.completed, mix.undone);
    }
  }

  RolloutVerdict Evaluate() {
    std::vector<FleetDevice> fleet;
    fleet.reserve(devices_.size());
    for (const SimDevice& device : devices_) {
      fleet.push_back({device.id, device.labels, device.hardware_class, device.on_rollout_build,
                       device.on_other_build});
    }
    FleetSplit split = SplitFleet(rollouts_[0], fleet);
    RolloutVerdict verdict = EvaluateRollout(rollouts_[0], split.members, split.control, now_);
    rollouts_[0] = ApplyVerdict(rollouts_[0], verdict, now_);
    return verdict;
  }

  void Advance(absl::Duration by) { now_ += by; }

  std::set<std::string> Members() const {
    std::set<std::string> members;
    for (const SimDevice& device : devices_) {
      if (device.current.rollout_id == kRolloutId) members.insert(device.id);
    }
    return members;
  }

  // Agentic devices whose bucket lies within `percent`: who should be in.
  std::set<std::string> ExpectedMembers(uint32_t percent) const {
    std::set<std::string> expected;
    for (const SimDevice& device : devices_) {
      if (device.agentic && BucketWithinPercent(RolloutBucket(kRolloutId, device.id), percent)) {
        expected.insert(device.id);
      }
    }
    return expected;
  }

  const std::vector<SimDevice>& devices() const { return devices_; }
  v1::Rollout& rollout() { return rollouts_[0]; }
  absl::Time now() const { return now_; }

 private:
  void Report(SimDevice& device, v1::Outcome outcome, uint32_t completed, uint32_t undone) {
    v1::ReportOutcomeRequest report;
    report.set_device_id(device.id);
    report.set_outcome(outcome);
    report.set_rollout_id(device.current.rollout_id);
    report.set_tasks_completed(completed);
    report.set_tasks_undone(undone);
    DeviceOutcomes& record =
        device.current.rollout_id.empty() ? device.on_other_build : device.on_rollout_build;
    ASSERT_THAT(FoldOutcomeReport(report, now_, &record), IsOk());
  }

  std::shared_ptr<const policy::Policy> policy_;
  absl::Time now_;
  std::vector<SimDevice> devices_;
  std::vector<v1::Rollout> rollouts_;
};

// The control group, still on w4a8 where AMX allows, undoes some of its
// work; the members on the fidelity build do not. Simulated counts.
constexpr TaskMix kHealthyMembers{10, 0};
constexpr TaskMix kControl{9, 1};
constexpr TaskMix kRegressedMembers{5, 5};

TEST(DeployFleetSimulationTest, FidelityRolloutReachesEveryAgenticDeviceStageByStage) {
  FleetSimulation fleet;
  fleet.Start(FidelityForAgentic(kRolloutId, /*min_reporting=*/10));
  std::set<std::string> previous_members;
  std::vector<uint32_t> stages_seen;
  for (int tick = 0; tick < 40 && fleet.rollout().state() == v1::ROLLOUT_STATE_PROGRESSING;
       ++tick) {
    fleet.ResolveAll();
    fleet.ReportTasks(kHealthyMembers, kControl);
    uint32_t stage = fleet.rollout().current_stage();
    std::set<std::string> members = fleet.Members();
    EXPECT_EQ(members, fleet.ExpectedMembers(fleet.rollout().stages(stage).percent()))
        << "stage " << stage;
    EXPECT_TRUE(std::includes(members.begin(), members.end(), previous_members.begin(),
                              previous_members.end()))
        << "a member left at stage " << stage;
    previous_members = members;
    if (stages_seen.empty() || stages_seen.back() != stage) stages_seen.push_back(stage);
    for (const SimDevice& device : fleet.devices()) {
      if (!device.agentic) {
        ASSERT_TRUE(device.current == device.baseline) << device.id << " changed at stage " << stage;
      }
    }
    RolloutVerdict verdict = fleet.Evaluate();
    ASSERT_NE(verdict.step, RolloutStep::kPause) << verdict.reason;
    fleet.Advance(kTick);
  }
  ASSERT_EQ(fleet.rollout().state(), v1::ROLLOUT_STATE_COMPLETED) << fleet.rollout().state_reason();
  EXPECT_EQ(stages_seen, (std::vector<uint32_t>{0, 1, 2, 3}));

  fleet.ResolveAll();
  int agentic = 0;
  int amx_switched = 0;
  for (const SimDevice& device : fleet.devices()) {
    if (!device.agentic) {
      EXPECT_TRUE(device.current == device.baseline) << device.id;
      continue;
    }
    ++agentic;
    EXPECT_EQ(device.current.priority, v1::PRIORITY_FIDELITY) << device.id;
    EXPECT_EQ(device.current.rollout_id, kRolloutId) << device.id;
    if (device.baseline.path_id == "w4a8-amx") {
      EXPECT_EQ(device.current.path_id, "w4a16-tinygemm-x86") << device.id;
      ++amx_switched;
    }
  }
  EXPECT_EQ(agentic, 3000);
  EXPECT_EQ(amx_switched, 600);
  EXPECT_EQ(fleet.Members().size(), 3000u);
}

TEST(DeployFleetSimulationTest, UndoneTasksTripTheGatePauseAndAbortRestores) {
  FleetSimulation fleet;
  fleet.Start(FidelityForAgentic(kRolloutId, /*min_reporting=*/10));
  // Healthy through stage 0; the regression shows once stage 1 (10%) runs.
  RolloutVerdict verdict;
  for (int tick = 0; tick < 40 && fleet.rollout().state() == v1::ROLLOUT_STATE_PROGRESSING;
       ++tick) {
    fleet.ResolveAll();
    bool regressed = fleet.rollout().current_stage() >= 1;
    fleet.ReportTasks(regressed ? kRegressedMembers : kHealthyMembers, kControl);
    verdict = fleet.Evaluate();
    fleet.Advance(kTick);
  }
  ASSERT_EQ(fleet.rollout().state(), v1::ROLLOUT_STATE_PAUSED) << fleet.rollout().state_reason();
  EXPECT_EQ(fleet.rollout().current_stage(), 1u);
  EXPECT_EQ(verdict.step, RolloutStep::kPause);
  EXPECT_THAT(fleet.rollout().state_reason(), HasSubstr("paused by gate: stage 2 of 4: task gate"));
  EXPECT_GT(fleet.rollout().members().tasks_undone(), 0u);
  // Members that joined at stage 1 undo half their tasks; the stage-0 members
  // bring healthy history, so the cohort lands between the two mixes.
  ASSERT_EQ(verdict.gates.size(), 3u);
  EXPECT_TRUE(verdict.gates[2].breached);
  EXPECT_DOUBLE_EQ(verdict.gates[2].control_rate, 0.1);
  EXPECT_GT(verdict.gates[2].member_rate, 0.2);
  EXPECT_LE(verdict.gates[2].member_rate, 0.5);
  EXPECT_FALSE(verdict.gates[0].breached);
  EXPECT_FALSE(verdict.gates[1].breached);

  // Paused for a day: nobody new joins, nobody leaves.
  fleet.ResolveAll();
  std::set<std::string> paused_members = fleet.Members();
  EXPECT_EQ(paused_members, fleet.ExpectedMembers(10));
  for (int tick = 0; tick < 96; ++tick) {
    fleet.Advance(kTick);
    fleet.ResolveAll();
    fleet.ReportTasks(kRegressedMembers, kControl);
    EXPECT_EQ(fleet.Evaluate().step, RolloutStep::kUnchanged);
  }
  EXPECT_EQ(fleet.Members(), paused_members);
  EXPECT_EQ(fleet.rollout().current_stage(), 1u);

  absl::StatusOr<v1::Rollout> aborted = AbortRollout(fleet.rollout(), "agentic tasks regressed");
  ASSERT_THAT(aborted, IsOk());
  fleet.rollout() = *aborted;
  fleet.ResolveAll();
  EXPECT_TRUE(fleet.Members().empty());
  for (const SimDevice& device : fleet.devices()) {
    EXPECT_TRUE(device.current == device.baseline) << device.id;
  }
}

TEST(DeployFleetSimulationTest, RollbackOnBreachReturnsMembersByItself) {
  FleetSimulation fleet;
  v1::Rollout spec = FidelityForAgentic(kRolloutId, /*min_reporting=*/10);
  spec.mutable_gates()->set_rollback_on_breach(true);
  fleet.Start(spec);
  for (int tick = 0; tick < 40 && fleet.rollout().state() == v1::ROLLOUT_STATE_PROGRESSING;
       ++tick) {
    fleet.ResolveAll();
    fleet.ReportTasks(kRegressedMembers, kControl);
    fleet.Evaluate();
    fleet.Advance(kTick);
  }
  ASSERT_EQ(fleet.rollout().state(), v1::ROLLOUT_STATE_ROLLED_BACK)
      << fleet.rollout().state_reason();
  EXPECT_EQ(fleet.rollout().current_stage(), 0u);
  EXPECT_THAT(fleet.rollout().state_reason(),
              HasSubstr("rolled back by gate: stage 1 of 4: task gate"));
  fleet.ResolveAll();
  EXPECT_TRUE(fleet.Members().empty());
  for (const SimDevice& device : fleet.devices()) {
    EXPECT_TRUE(device.current == device.baseline) << device.id;
  }
}

TEST(DeployFleetSimulationTest, SilentMembersPauseTheRolloutAfterTheTimeout) {
  FleetSimulation fleet;
  fleet.Start(FidelityForAgentic(kRolloutId, /*min_reporting=*/10));
  // Nobody resolves, so no member ever reports on the new build.
  RolloutVerdict verdict = fleet.Evaluate();
  EXPECT_EQ(verdict.step, RolloutStep::kHold);
  fleet.Advance(absl::Minutes(29));
  EXPECT_EQ(fleet.Evaluate().step, RolloutStep::kHold);
  fleet.Advance(absl::Minutes(1));
  verdict = fleet.Evaluate();
  EXPECT_EQ(verdict.step, RolloutStep::kPause);
  EXPECT_EQ(verdict.members.silent(), verdict.members.devices());
  EXPECT_THAT(verdict.reason, HasSubstr("engine gate: members 1.000"));
}

}  // namespace
}  // namespace weightpath::deploy
