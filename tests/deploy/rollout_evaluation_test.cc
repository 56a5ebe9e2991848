#include "deploy/rollout_evaluation.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "deploy/rollout_bucket.h"
#include "deploy/rollout_validation.h"
#include "deploy/stage_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_fixtures.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::deploy {
namespace {

using ::testing::HasSubstr;
using ::weightpath::deploy::testing::Epoch;
using ::weightpath::deploy::testing::FidelityForAgentic;
using ::weightpath::testing::IsOk;

v1::Rollout Started(v1::Rollout spec) {
  absl::StatusOr<v1::Rollout> rollout = StartRollout(spec, *policy::DefaultPolicy(), Epoch());
  EXPECT_THAT(rollout, IsOk());
  return *rollout;
}

std::vector<CohortDevice> Devices(const std::string& prefix, int count, v1::Outcome outcome) {
  std::vector<CohortDevice> devices;
  for (int i = 0; i < count; ++i) {
    CohortDevice device{absl::StrCat(prefix, i), {}};
    device.outcomes.lifecycle = outcome;
    // Reported once the stage had opened: control evidence counts from then.
    device.outcomes.lifecycle_at = Epoch() + absl::Seconds(1);
    devices.push_back(device);
  }
  return devices;
}

const absl::Time kAfterBake = Epoch() + absl::Hours(1);

TEST(DeployRolloutEvaluationTest, HoldsWhileBakingEvenWithEnoughReports) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid"));
  RolloutVerdict verdict =
      EvaluateRollout(rollout, Devices("m", 10, v1::OUTCOME_ENGINE_STARTED), {},
                      Epoch() + absl::Minutes(45));
  EXPECT_EQ(verdict.step, RolloutStep::kHold);
  EXPECT_EQ(verdict.bake_left, absl::Minutes(15));
  EXPECT_THAT(verdict.reason, HasSubstr("stage 1 of 4: baking, 15m 0s left"));
}

TEST(DeployRolloutEvaluationTest, ReasonsCountStagesFromOneAndRoundTheBakeToSeconds) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid", /*min_reporting=*/1));
  std::vector<CohortDevice> members = Devices("m", 1, v1::OUTCOME_ENGINE_STARTED);
  // 34m 24.5s into an hour's bake: 25m 35.5s left, shown as whole seconds.
  RolloutVerdict baking =
      EvaluateRollout(rollout, members, {}, Epoch() + absl::Seconds(34 * 60 + 24.5));
  EXPECT_EQ(baking.reason, "stage 1 of 4: baking, 25m 36s left");

  RolloutVerdict advanced = EvaluateRollout(rollout, members, {}, kAfterBake);
  EXPECT_EQ(advanced.reason, "stage 1 of 4 passed its gates; advanced to stage 2 of 4 (10%)");

  rollout = ApplyVerdict(rollout, advanced, kAfterBake);
  rollout.mutable_stages(1)->set_min_bake_seconds(0);
  std::vector<CohortDevice> pending = Devices("b", 1, v1::OUTCOME_BOOT_OK);
  EXPECT_EQ(EvaluateRollout(rollout, pending, {}, kAfterBake).reason,
            "stage 2 of 4: 0 of 1 required member has concluded");

  rollout.set_current_stage(3);
  EXPECT_EQ(EvaluateRollout(rollout, members, {}, kAfterBake + absl::Hours(1)).reason,
            "stage 4 of 4 passed its gates; complete");
}

TEST(DeployStageTextTest, StagesFromOneAndWholeSeconds) {
  EXPECT_EQ(StageOf(0, 4), "stage 1 of 4");
  EXPECT_EQ(StageOf(3, 4), "stage 4 of 4");
  EXPECT_EQ(FormatSeconds(absl::ZeroDuration()), "0s");
  EXPECT_EQ(FormatSeconds(absl::Milliseconds(44600)), "45s");
  EXPECT_EQ(FormatSeconds(absl::Seconds(125)), "2m 5s");
  EXPECT_EQ(FormatSeconds(absl::Seconds(3603)), "1h 0m 3s");
  EXPECT_EQ(FormatSeconds(-absl::Seconds(61)), "-1m 1s");
}

TEST(DeployRolloutEvaluationTest, HoldsUntilEnoughMembersConclude) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid", /*min_reporting=*/5));
  std::vector<CohortDevice> members = Devices("ok", 3, v1::OUTCOME_ENGINE_STARTED);
  for (const CohortDevice& booting : Devices("boot", 4, v1::OUTCOME_BOOT_OK)) {
    members.push_back(booting);
  }
  // A ten-minute bake, so at twenty minutes the bake is over while the
  // 30-minute report timeout is not: the BOOT_OK members are still pending.
  rollout.mutable_stages(0)->set_min_bake_seconds(600);
  RolloutVerdict verdict = EvaluateRollout(rollout, members, {}, Epoch() + absl::Minutes(20));
  EXPECT_EQ(verdict.step, RolloutStep::kHold);
  EXPECT_THAT(verdict.reason, HasSubstr("stage 1 of 4: 3 of 5 required members have concluded"));
}

TEST(DeployRolloutEvaluationTest, BootOkAloneNeverAdvancesAStage) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid", /*min_reporting=*/5));
  rollout.mutable_stages(0)->set_report_timeout_seconds(7200);  // outlasts the bake
  std::vector<CohortDevice> booted = Devices("m", 10, v1::OUTCOME_BOOT_OK);
  RolloutVerdict waiting = EvaluateRollout(rollout, booted, {}, Epoch() + absl::Minutes(90));
  EXPECT_EQ(waiting.step, RolloutStep::kHold);
  EXPECT_EQ(waiting.members.reporting(), 10u);
  EXPECT_EQ(waiting.members.engine_started(), 0u);
  EXPECT_THAT(waiting.reason, HasSubstr("0 of 5 required members have concluded"));
  // Still only BOOT_OK when the timeout runs out: they count as silent.
  RolloutVerdict timed_out = EvaluateRollout(rollout, booted, {}, Epoch() + absl::Hours(2));
  EXPECT_EQ(timed_out.step, RolloutStep::kPause);
  EXPECT_EQ(timed_out.members.silent(), 10u);
  EXPECT_THAT(timed_out.reason, HasSubstr("engine gate: members 1.000"));
}

TEST(DeployRolloutEvaluationTest, SmallCohortNeedsOnlyItsOwnSize) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid", /*min_reporting=*/50));
  RolloutVerdict verdict =
      EvaluateRollout(rollout, Devices("m", 2, v1::OUTCOME_ENGINE_STARTED), {}, kAfterBake);
  EXPECT_EQ(verdict.step, RolloutStep::kAdvance);
  EXPECT_EQ(verdict.stage, 1u);
}

TEST(DeployRolloutEvaluationTest, AdvancesThenCompletesAfterTheLastStage) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid"));
  std::vector<CohortDevice> members = Devices("m", 10, v1::OUTCOME_ENGINE_STARTED);
  absl::Time now = kAfterBake;
  for (uint32_t expected_stage = 1; expected_stage <= 3; ++expected_stage) {
    RolloutVerdict verdict = EvaluateRollout(rollout, members, {}, now);
    ASSERT_EQ(verdict.step, RolloutStep::kAdvance) << verdict.reason;
    rollout = ApplyVerdict(rollout, verdict, now);
    EXPECT_EQ(rollout.current_stage(), expected_stage);
    EXPECT_EQ(FromProtoTime(rollout.stage_started_at()), now);
    EXPECT_EQ(rollout.stage_entered_at_size(), static_cast<int>(expected_stage) + 1);
    now += absl::Hours(1);
  }
  RolloutVerdict last = EvaluateRollout(rollout, members, {}, now);
  ASSERT_EQ(last.step, RolloutStep::kComplete);
  rollout = ApplyVerdict(rollout, last, now);
  EXPECT_EQ(rollout.state(), v1::ROLLOUT_STATE_COMPLETED);
  EXPECT_EQ(EvaluateRollout(rollout, members, {}, now).step, RolloutStep::kUnchanged);
}

TEST(DeployRolloutEvaluationTest, GatesCompareAgainstTheControlGroup) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid"));  // engine gate 0.05
  std::vector<CohortDevice> members = Devices("ok", 9, v1::OUTCOME_ENGINE_STARTED);
  members.push_back(Devices("bad", 1, v1::OUTCOME_ENGINE_START_FAILED)[0]);  // 10%
  // Control fails at 8%: the members' excess is 2 points, within 5.
  std::vector<CohortDevice> control = Devices("c", 92, v1::OUTCOME_ENGINE_STARTED);
  for (const CohortDevice& failed : Devices("cf", 8, v1::OUTCOME_ENGINE_START_FAILED)) {
    control.push_back(failed);
  }
  RolloutVerdict within = EvaluateRollout(rollout, members, control, kAfterBake);
  EXPECT_EQ(within.step, RolloutStep::kAdvance) << within.reason;

  // A healthy control group makes the same 10% a 10-point excess.
  RolloutVerdict breached = EvaluateRollout(
      rollout, members, Devices("c", 100, v1::OUTCOME_ENGINE_STARTED), kAfterBake);
  EXPECT_EQ(breached.step, RolloutStep::kPause);
  EXPECT_THAT(breached.reason,
              HasSubstr("engine gate: members 0.100 vs control 0.000, delta 0.100 > 0.050"));
  v1::Rollout paused = ApplyVerdict(rollout, breached, kAfterBake);
  EXPECT_EQ(paused.state(), v1::ROLLOUT_STATE_PAUSED);
  EXPECT_EQ(paused.current_stage(), 0u);
  EXPECT_THAT(paused.state_reason(), HasSubstr("paused by gate: stage 1 of 4: engine gate"));
  EXPECT_EQ(paused.members().engine_failed(), 1u);
  EXPECT_EQ(paused.control().engine_started(), 100u);
}

TEST(DeployRolloutEvaluationTest, AGateTripsDuringTheBake) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid"));
  RolloutVerdict verdict = EvaluateRollout(
      rollout, Devices("b", 5, v1::OUTCOME_BOOT_FAILED), {}, Epoch() + absl::Minutes(5));
  EXPECT_EQ(verdict.step, RolloutStep::kPause);
  EXPECT_THAT(verdict.reason, HasSubstr("boot gate"));
}

TEST(DeployRolloutEvaluationTest, RollbackOnBreachWhenConfigured) {
  v1::Rollout spec = FidelityForAgentic("fid");
  spec.mutable_gates()->set_rollback_on_breach(true);
  v1::Rollout rollout = Started(spec);
  RolloutVerdict verdict = EvaluateRollout(
      rollout, Devices("v", 5, v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED), {}, kAfterBake);
  EXPECT_EQ(verdict.step, RolloutStep::kRollback);
  v1::Rollout rolled_back = ApplyVerdict(rollout, verdict, kAfterBake);
  EXPECT_EQ(rolled_back.state(), v1::ROLLOUT_STATE_ROLLED_BACK);
  EXPECT_THAT(rolled_back.state_reason(), HasSubstr("rolled back by gate"));
}

TEST(DeployRolloutEvaluationTest, TaskGateReadsUndoneAndFailedTasks) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid"));  // task gate 0.10
  std::vector<CohortDevice> members = Devices("m", 5, v1::OUTCOME_ENGINE_STARTED);
  members[0].outcomes.tasks_completed = 8;
  members[0].outcomes.tasks_undone = 1;
  members[1].outcomes.tasks_failed = 1;  // 2 of 10 tasks went wrong: 0.20
  std::vector<CohortDevice> control = Devices("c", 5, v1::OUTCOME_ENGINE_STARTED);
  control[0].outcomes.tasks_completed = 19;
  control[0].outcomes.tasks_undone = 1;  // 0.05
  RolloutVerdict verdict = EvaluateRollout(rollout, members, control, kAfterBake);
  EXPECT_EQ(verdict.step, RolloutStep::kPause);
  EXPECT_THAT(verdict.reason,
              HasSubstr("task gate: members 0.200 vs control 0.050, delta 0.150 > 0.100"));
  ASSERT_EQ(verdict.gates.size(), 3u);
  EXPECT_FALSE(verdict.gates[0].breached);
  EXPECT_FALSE(verdict.gates[1].breached);
  EXPECT_TRUE(verdict.gates[2].breached);
}

TEST(DeployRolloutEvaluationTest, AThresholdIsInclusive) {
  v1::Rollout spec = FidelityForAgentic("fid");
  spec.mutable_gates()->set_max_engine_failure_delta(0.2);
  v1::Rollout rollout = Started(spec);
  std::vector<CohortDevice> members = Devices("ok", 4, v1::OUTCOME_ENGINE_STARTED);
  members.push_back(Devices("bad", 1, v1::OUTCOME_ENGINE_START_FAILED)[0]);  // exactly 0.2
  EXPECT_EQ(EvaluateRollout(rollout, members, {}, kAfterBake).step, RolloutStep::kAdvance);
}

TEST(DeployRolloutEvaluationTest, PausedRolloutsTakeNoAutomaticStep) {
  v1::Rollout rollout = Started(FidelityForAgentic("fid"));
  rollout.set_state(v1::ROLLOUT_STATE_PAUSED);
  RolloutVerdict verdict =
      EvaluateRollout(rollout, Devices("m", 10, v1::OUTCOME_ENGINE_STARTED), {}, kAfterBake);
  EXPECT_EQ(verdict.step, RolloutStep::kUnchanged);
  EXPECT_EQ(verdict.members.engine_started(), 10u);
  v1::Rollout same = ApplyVerdict(rollout, verdict, kAfterBake);
  EXPECT_EQ(same.state(), v1::ROLLOUT_STATE_PAUSED);
  EXPECT_EQ(same.current_stage(), 0u);
}

// Found by hand: the first device ids whose buckets fall in each stage of
// "fid" (1%, 10%, 50%, 100%).
std::vector<std::string> OnePerStage() {
  std::vector<std::string> ids(4);
  const uint32_t bounds[] = {0, 100, 1000, 5000, 10000};
  for (int i = 0, found = 0; found < 4; ++i) {
    const std::string id = absl::StrCat("device-", i);
    const uint32_t bucket = RolloutBucket("fid", id);
    for (int stage = 0; stage < 4; ++stage) {
      if (bucket >= bounds[stage] && bucket < bounds[stage + 1] && ids[stage].empty()) {
        ids[stage] = id;
        ++found;
      }
    }
  }
  return ids;
}

CohortDevice WithOutcome(const std::string& id, v1::Outcome outcome, absl::Time at) {
  CohortDevice device{id, {}};
  device.outcomes.lifecycle = outcome;
  device.outcomes.lifecycle_at = at;
  return device;
}

// Earlier stages' members do not carry a later stage: the last stage's one
// member has not reported, so the rollout does not complete; when it rolls
// back, the last stage pauses and the failure is counted.
TEST(DeployRolloutEvaluationTest, TheLastStageWaitsForItsOwnMembersAndCountsTheirFailures) {
  // No reporting minimum: what holds the stage is its own member.
  v1::Rollout spec = FidelityForAgentic("fid", /*min_reporting=*/0);
  for (v1::RolloutStage& stage : *spec.mutable_stages()) stage.set_min_bake_seconds(0);
  v1::Rollout rollout = Started(spec);
  const absl::Time opened = Epoch() + absl::Hours(3);
  EnterStage(3, opened, &rollout);
  const std::vector<std::string> ids = OnePerStage();
  std::vector<CohortDevice> members;
  for (int stage = 0; stage < 3; ++stage) {
    members.push_back(WithOutcome(ids[stage], v1::OUTCOME_ENGINE_STARTED, Epoch()));
  }
  CohortDevice late = WithOutcome(ids[3], v1::OUTCOME_UNSPECIFIED, absl::InfinitePast());
  late.first_shaped_resolve = absl::InfiniteFuture();  // has not resolved since stage 4 opened
  members.push_back(late);

  RolloutVerdict waiting = EvaluateRollout(rollout, members, {}, opened + absl::Seconds(2));
  EXPECT_EQ(waiting.step, RolloutStep::kHold) << waiting.reason;
  EXPECT_THAT(waiting.reason, HasSubstr("1 of 1 member it admitted has not concluded yet"));
  EXPECT_EQ(waiting.members.devices(), 1u);
  EXPECT_EQ(waiting.all_members.devices(), 4u);
  EXPECT_EQ(waiting.all_members.engine_started(), 3u);

  members[3] = WithOutcome(ids[3], v1::OUTCOME_ROLLED_BACK, opened + absl::Minutes(3));
  RolloutVerdict failed = EvaluateRollout(rollout, members, {}, opened + absl::Minutes(4));
  EXPECT_EQ(failed.step, RolloutStep::kPause) << failed.reason;
  EXPECT_THAT(failed.reason, HasSubstr("stage 4 of 4: engine gate: members 1.000"));
  EXPECT_EQ(ApplyVerdict(rollout, failed, opened).members().engine_failed(), 1u);
}

TEST(DeployRolloutEvaluationTest, ACompletedRolloutCountsFailuresWithinItsWatch) {
  v1::Rollout spec = FidelityForAgentic("fid", /*min_reporting=*/1);
  for (v1::RolloutStage& stage : *spec.mutable_stages()) stage.set_min_bake_seconds(0);
  spec.set_watch_after_completion_seconds(3600);
  v1::Rollout rollout = Started(spec);
  EnterStage(3, Epoch(), &rollout);
  const std::vector<std::string> ids = OnePerStage();
  std::vector<CohortDevice> members;
  for (const std::string& id : ids) {
    members.push_back(WithOutcome(id, v1::OUTCOME_ENGINE_STARTED, Epoch()));
  }
  RolloutVerdict complete = EvaluateRollout(rollout, members, {}, Epoch() + absl::Minutes(1));
  ASSERT_EQ(complete.step, RolloutStep::kComplete) << complete.reason;
  rollout = ApplyVerdict(rollout, complete, Epoch() + absl::Minutes(1));
  EXPECT_EQ(FromProtoTime(rollout.completed_at()), Epoch() + absl::Minutes(1));

  members[0] = WithOutcome(ids[0], v1::OUTCOME_ROLLED_BACK, Epoch() + absl::Minutes(30));
  RolloutVerdict watched = EvaluateRollout(rollout, members, {}, Epoch() + absl::Minutes(31));
  EXPECT_EQ(watched.step, RolloutStep::kUnchanged);
  ASSERT_TRUE(watched.failures_after_completion.has_value());
  EXPECT_EQ(*watched.failures_after_completion, 1u);
  EXPECT_EQ(ApplyVerdict(rollout, watched, Epoch()).failures_after_completion(), 1u);
  EXPECT_FALSE(EvaluateRollout(rollout, members, {}, Epoch() + absl::Minutes(62))
                   .failures_after_completion.has_value())
      << "the watch is over";
}

}  // namespace
}  // namespace weightpath::deploy
