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

}  // namespace
}  // namespace weightpath::deploy
