#include "deploy/cohort_outcomes.h"

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
using ::weightpath::deploy::testing::Epoch;
using ::weightpath::deploy::testing::FidelityForAgentic;
using ::weightpath::deploy::testing::MakeLabels;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

v1::ReportOutcomeRequest Report(const std::string& device, const std::string& rollout,
                                v1::Outcome outcome) {
  v1::ReportOutcomeRequest report;
  report.set_device_id(device);
  report.set_rollout_id(rollout);
  report.set_outcome(outcome);
  return report;
}

v1::Rollout Started() {
  absl::StatusOr<v1::Rollout> rollout =
      StartRollout(FidelityForAgentic("fid"), *policy::DefaultPolicy(), Epoch());
  EXPECT_THAT(rollout, IsOk());
  return *rollout;
}

CohortDevice Member(const std::string& id, v1::Outcome outcome) {
  CohortDevice device{id, {}};
  device.outcomes.device_id = id;
  device.outcomes.rollout_id = "fid";
  device.outcomes.lifecycle = outcome;
  return device;
}

TEST(DeployCohortOutcomesTest, FoldKeepsTheLatestLifecycleAndSumsTasks) {
  DeviceOutcomes record{"dev-1", "fid"};
  ASSERT_THAT(FoldOutcomeReport(Report("dev-1", "fid", v1::OUTCOME_BOOT_OK), Epoch(), &record),
              IsOk());
  ASSERT_THAT(FoldOutcomeReport(Report("dev-1", "fid", v1::OUTCOME_ENGINE_STARTED),
                                Epoch() + absl::Minutes(2), &record),
              IsOk());
  // Arrives late but was observed before the engine started: ignored.
  ASSERT_THAT(FoldOutcomeReport(Report("dev-1", "fid", v1::OUTCOME_BOOT_OK),
                                Epoch() + absl::Minutes(1), &record),
              IsOk());
  v1::ReportOutcomeRequest tasks = Report("dev-1", "fid", v1::OUTCOME_TASKS);
  tasks.set_tasks_completed(3);
  tasks.set_tasks_undone(1);
  ASSERT_THAT(FoldOutcomeReport(tasks, Epoch() + absl::Minutes(5), &record), IsOk());
  tasks.set_tasks_failed(2);
  ASSERT_THAT(FoldOutcomeReport(tasks, Epoch() + absl::Minutes(6), &record), IsOk());
  EXPECT_EQ(record.lifecycle, v1::OUTCOME_ENGINE_STARTED);
  EXPECT_EQ(record.lifecycle_at, Epoch() + absl::Minutes(2));
  EXPECT_EQ(record.tasks_completed, 6u);
  EXPECT_EQ(record.tasks_undone, 2u);
  EXPECT_EQ(record.tasks_failed, 2u);
}

TEST(DeployCohortOutcomesTest, FoldRefusesReportsForAnotherRecord) {
  DeviceOutcomes record{"dev-1", "fid"};
  EXPECT_THAT(FoldOutcomeReport(Report("dev-2", "fid", v1::OUTCOME_BOOT_OK), Epoch(), &record),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("report.device_id")));
  EXPECT_THAT(FoldOutcomeReport(Report("dev-1", "", v1::OUTCOME_BOOT_OK), Epoch(), &record),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("report.rollout_id")));
  EXPECT_THAT(
      FoldOutcomeReport(Report("dev-1", "fid", v1::OUTCOME_UNSPECIFIED), Epoch(), &record),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("report.outcome")));
}

TEST(DeployCohortOutcomesTest, OnlyEngineStartedCountsAsSuccess) {
  v1::Rollout rollout = Started();
  std::vector<CohortDevice> members = {
      Member("a", v1::OUTCOME_BOOT_OK),
      Member("b", v1::OUTCOME_BOOT_OK),
      Member("c", v1::OUTCOME_ENGINE_STARTED),
  };
  v1::CohortOutcomes counts = CountMembers(rollout, members, Epoch() + absl::Minutes(1));
  EXPECT_EQ(counts.devices(), 3u);
  EXPECT_EQ(counts.reporting(), 3u);
  EXPECT_EQ(counts.engine_started(), 1u);
  EXPECT_EQ(Concluded(counts), 1u) << "BOOT_OK alone concludes nothing";
}

TEST(DeployCohortOutcomesTest, SilentMembersCountAsFailedAfterTheirStageTimeout) {
  v1::Rollout rollout = Started();  // report timeout 1800 s
  EnterStage(3, Epoch(), &rollout);  // every stage entered at once: all are members
  std::vector<CohortDevice> members = {
      Member("quiet", v1::OUTCOME_UNSPECIFIED),
      Member("stuck-at-boot", v1::OUTCOME_BOOT_OK),
      Member("ok", v1::OUTCOME_ENGINE_STARTED),
  };
  v1::CohortOutcomes before = CountMembers(rollout, members, Epoch() + absl::Seconds(1799));
  EXPECT_EQ(before.silent(), 0u);
  EXPECT_DOUBLE_EQ(EngineFailureRate(before), 0.0);

  v1::CohortOutcomes after = CountMembers(rollout, members, Epoch() + absl::Seconds(1800));
  EXPECT_EQ(after.silent(), 2u);
  EXPECT_EQ(Concluded(after), 3u);
  EXPECT_DOUBLE_EQ(EngineFailureRate(after), 2.0 / 3.0);
}

TEST(DeployCohortOutcomesTest, TimeoutRunsFromTheStageThatAdmittedTheMember) {
  v1::Rollout rollout = Started();
  EnterStage(2, Epoch() + absl::Hours(5), &rollout);  // 50%, entered at +5h
  std::string early, late;
  for (int i = 0; early.empty() || late.empty(); ++i) {
    std::string id = absl::StrCat("device-", i);
    uint32_t bucket = RolloutBucket("fid", id);
    if (bucket < 100 && early.empty()) early = id;
    if (bucket >= 1000 && bucket < 5000 && late.empty()) late = id;
  }
  std::vector<CohortDevice> members = {Member(early, v1::OUTCOME_UNSPECIFIED),
                                       Member(late, v1::OUTCOME_UNSPECIFIED)};
  // Stage 1 was entered at +5h too (EnterStage fills skipped stages), stage 0
  // at the epoch: only the stage-0 member is overdue at +5h10m.
  v1::CohortOutcomes counts =
      CountMembers(rollout, members, Epoch() + absl::Hours(5) + absl::Minutes(10));
  EXPECT_EQ(counts.silent(), 1u);
}

TEST(DeployCohortOutcomesTest, FailuresAreSortedIntoTheirGates) {
  v1::Rollout rollout = Started();
  std::vector<CohortDevice> members = {
      Member("boot", v1::OUTCOME_BOOT_FAILED),
      Member("verify", v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED),
      Member("start", v1::OUTCOME_ENGINE_START_FAILED),
      Member("back", v1::OUTCOME_ROLLED_BACK),
      Member("ok", v1::OUTCOME_ENGINE_STARTED),
  };
  members[4].outcomes.tasks_completed = 6;
  members[4].outcomes.tasks_undone = 3;
  members[4].outcomes.tasks_failed = 1;
  v1::CohortOutcomes counts = CountMembers(rollout, members, Epoch());
  EXPECT_EQ(counts.boot_failed(), 1u);
  EXPECT_EQ(counts.artifact_failed(), 1u);
  EXPECT_EQ(counts.engine_failed(), 2u);
  EXPECT_EQ(counts.engine_started(), 1u);
  EXPECT_DOUBLE_EQ(BootFailureRate(counts), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(EngineFailureRate(counts), 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(TaskFailureRate(counts), 4.0 / 10.0);
}

TEST(DeployCohortOutcomesTest, ControlDevicesAreNeverSilent) {
  CohortDevice quiet{"quiet", {}};
  CohortDevice running{"running", {}};
  running.outcomes.lifecycle = v1::OUTCOME_ENGINE_STARTED;
  v1::CohortOutcomes counts = CountControl({quiet, running});
  EXPECT_EQ(counts.devices(), 2u);
  EXPECT_EQ(counts.reporting(), 1u);
  EXPECT_EQ(counts.silent(), 0u);
  EXPECT_EQ(Concluded(counts), 1u);
}

TEST(DeployCohortOutcomesTest, SplitFleetSeparatesMembersControlAndOutsiders) {
  v1::Rollout rollout = Started();
  EnterStage(2, Epoch(), &rollout);  // 50%
  std::vector<FleetDevice> fleet;
  for (int i = 0; i < 200; ++i) {
    FleetDevice device;
    device.device_id = absl::StrCat("device-", i);
    device.labels = MakeLabels({{"workload", i % 2 == 0 ? "agentic" : "chat"}});
    device.on_rollout_build = {device.device_id, "fid", v1::OUTCOME_ENGINE_STARTED};
    device.on_other_build = {device.device_id, "", v1::OUTCOME_BOOT_FAILED};
    fleet.push_back(device);
  }
  FleetSplit split = SplitFleet(rollout, fleet);
  EXPECT_EQ(split.members.size() + split.control.size(), 100u);
  for (const CohortDevice& member : split.members) {
    EXPECT_LT(RolloutBucket("fid", member.device_id), 5000u);
    EXPECT_EQ(member.outcomes.lifecycle, v1::OUTCOME_ENGINE_STARTED);
  }
  for (const CohortDevice& control : split.control) {
    EXPECT_GE(RolloutBucket("fid", control.device_id), 5000u);
    EXPECT_EQ(control.outcomes.lifecycle, v1::OUTCOME_BOOT_FAILED);
  }
}

TEST(DeployCohortOutcomesTest, AssignOutcomeRecordsPicksThisRolloutsAndTheLatestOther) {
  DeviceOutcomes mine{"dev-1", "fid", v1::OUTCOME_ENGINE_STARTED, Epoch() + absl::Hours(1)};
  DeviceOutcomes older{"dev-1", "", v1::OUTCOME_BOOT_FAILED, Epoch()};
  DeviceOutcomes newer{"dev-1", "other", v1::OUTCOME_ENGINE_STARTED, Epoch() + absl::Hours(2)};
  FleetDevice device;
  device.device_id = "dev-1";
  AssignOutcomeRecords({older, mine, newer}, "fid", &device);
  EXPECT_EQ(device.on_rollout_build.rollout_id, "fid");
  EXPECT_EQ(device.on_rollout_build.lifecycle, v1::OUTCOME_ENGINE_STARTED);
  EXPECT_EQ(device.on_other_build.rollout_id, "other");

  AssignOutcomeRecords({older}, "fid", &device);
  EXPECT_EQ(device.on_rollout_build.lifecycle, v1::OUTCOME_UNSPECIFIED) << "no report yet";
  EXPECT_EQ(device.on_rollout_build.device_id, "dev-1");
  EXPECT_EQ(device.on_other_build.lifecycle, v1::OUTCOME_BOOT_FAILED);
}

// A device learns of a rollout at its next resolve; an hour-long check-in
// interval must not make half a stage "silent" before it could know.
TEST(DeployCohortOutcomesTest, SilenceRunsFromTheFirstShapedResolve) {
  v1::Rollout rollout = Started();  // report timeout 1800 s
  EnterStage(3, Epoch(), &rollout);
  CohortDevice told_late = Member("told-late", v1::OUTCOME_UNSPECIFIED);
  told_late.first_shaped_resolve = Epoch() + absl::Minutes(50);
  CohortDevice never_told = Member("never-told", v1::OUTCOME_UNSPECIFIED);
  never_told.first_shaped_resolve = absl::InfiniteFuture();
  CohortDevice told_before = Member("told-before", v1::OUTCOME_UNSPECIFIED);
  told_before.first_shaped_resolve = Epoch() - absl::Hours(3);  // a deleted namesake's
  const std::vector<CohortDevice> members = {told_late, never_told, told_before};

  v1::CohortOutcomes at_timeout = CountMembers(rollout, members, Epoch() + absl::Seconds(1800));
  EXPECT_EQ(at_timeout.silent(), 1u) << "only the one told when the stage opened";
  EXPECT_EQ(at_timeout.unreached(), 0u);

  // 50 min + 30 min: the late one is silent too; the one no resolve reached
  // is unreached once the reach timeout (77 min) has passed, never silent.
  v1::CohortOutcomes later = CountMembers(rollout, members, Epoch() + absl::Minutes(80));
  EXPECT_EQ(later.silent(), 2u);
  EXPECT_EQ(later.unreached(), 1u);
  EXPECT_EQ(Concluded(later), 2u);
  EXPECT_EQ(Settled(later), 3u);
  EXPECT_EQ(CountMembers(rollout, members, Epoch() + absl::Minutes(76)).unreached(), 0u);
}

TEST(DeployCohortOutcomesTest, TheCurrentStageIsJudgedOnItsOwnMembersAndWindow) {
  v1::Rollout rollout = Started();
  EnterStage(1, Epoch() + absl::Hours(2), &rollout);  // 10%
  std::string stage_one, stage_two;
  for (int i = 0; stage_one.empty() || stage_two.empty(); ++i) {
    std::string id = absl::StrCat("device-", i);
    uint32_t bucket = RolloutBucket("fid", id);
    if (bucket < 100 && stage_one.empty()) stage_one = id;
    if (bucket >= 100 && bucket < 1000 && stage_two.empty()) stage_two = id;
  }
  EXPECT_EQ(AdmittingStage(rollout, stage_one), 0u);
  EXPECT_EQ(AdmittingStage(rollout, stage_two), 1u);
  CohortDevice old_report{"control-old", {}};
  old_report.outcomes.lifecycle = v1::OUTCOME_ENGINE_START_FAILED;
  old_report.outcomes.lifecycle_at = Epoch() + absl::Hours(1);
  CohortDevice new_report{"control-new", {}};
  new_report.outcomes.lifecycle = v1::OUTCOME_ENGINE_STARTED;
  new_report.outcomes.lifecycle_at = Epoch() + absl::Hours(3);
  const FleetSplit stage = CurrentStageCohorts(
      rollout, FleetSplit{{Member(stage_one, v1::OUTCOME_ENGINE_STARTED),
                           Member(stage_two, v1::OUTCOME_UNSPECIFIED)},
                          {old_report, new_report}});
  ASSERT_EQ(stage.members.size(), 1u);
  EXPECT_EQ(stage.members[0].device_id, stage_two);
  const v1::CohortOutcomes control = CountControl(stage.control);
  EXPECT_EQ(control.devices(), 2u);
  EXPECT_EQ(control.engine_started(), 1u);
  EXPECT_EQ(control.engine_failed(), 0u) << "reported before the stage opened";
}

}  // namespace
}  // namespace weightpath::deploy
