#include "deploy/operator_actions.h"

#include "absl/strings/str_cat.h"
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
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

v1::Rollout Progressing() {
  absl::StatusOr<v1::Rollout> rollout =
      StartRollout(FidelityForAgentic("fid"), *policy::DefaultPolicy(), Epoch());
  EXPECT_THAT(rollout, IsOk());
  return *rollout;
}

v1::CohortOutcomes Healthy(uint64_t devices) {
  v1::CohortOutcomes outcomes;
  outcomes.set_devices(devices);
  outcomes.set_reporting(devices);
  outcomes.set_engine_started(devices);
  return outcomes;
}

TEST(DeployOperatorActionsTest, PauseAndResume) {
  absl::StatusOr<v1::Rollout> paused = PauseRollout(Progressing(), "checking dashboards");
  ASSERT_THAT(paused, IsOk());
  EXPECT_EQ(paused->state(), v1::ROLLOUT_STATE_PAUSED);
  EXPECT_EQ(paused->state_reason(), "paused by operator: checking dashboards");
  EXPECT_THAT(PauseRollout(*paused, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot pause rollout 'fid': it is ROLLOUT_STATE_PAUSED")));

  absl::Time later = Epoch() + absl::Hours(3);
  absl::StatusOr<v1::Rollout> resumed = ResumeRollout(*paused, "", later);
  ASSERT_THAT(resumed, IsOk());
  EXPECT_EQ(resumed->state(), v1::ROLLOUT_STATE_PROGRESSING);
  EXPECT_EQ(FromProtoTime(resumed->stage_started_at()), later) << "the bake starts over";
  EXPECT_EQ(FromProtoTime(resumed->stage_entered_at(0)), Epoch()) << "timeouts do not";
  EXPECT_THAT(ResumeRollout(*resumed, "", later),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("it is ROLLOUT_STATE_PROGRESSING; resume needs PAUSED")));
}

TEST(DeployOperatorActionsTest, AdvanceSkipsTheBakeButNotATrippedGate) {
  absl::Time soon = Epoch() + absl::Minutes(1);
  absl::StatusOr<v1::Rollout> advanced =
      AdvanceRollout(Progressing(), Healthy(3), Healthy(100), "urgent fix", soon);
  ASSERT_THAT(advanced, IsOk());
  EXPECT_EQ(advanced->current_stage(), 1u);
  EXPECT_EQ(FromProtoTime(advanced->stage_entered_at(1)), soon);
  EXPECT_THAT(advanced->state_reason(),
              HasSubstr("advanced by operator to stage 2 of 4: urgent fix"));

  v1::CohortOutcomes failing = Healthy(3);
  failing.set_engine_started(2);
  failing.set_engine_failed(1);
  EXPECT_THAT(AdvanceRollout(Progressing(), failing, Healthy(100), "", soon),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("past a tripped gate: engine gate: members 0.333")));
}

TEST(DeployOperatorActionsTest, AdvanceFromTheLastStageCompletes) {
  v1::Rollout rollout = Progressing();
  rollout.set_current_stage(3);
  absl::StatusOr<v1::Rollout> completed =
      AdvanceRollout(rollout, Healthy(10), v1::CohortOutcomes(), "", Epoch());
  ASSERT_THAT(completed, IsOk());
  EXPECT_EQ(completed->state(), v1::ROLLOUT_STATE_COMPLETED);
}

TEST(DeployOperatorActionsTest, AdvanceNeedsAProgressingRollout) {
  v1::Rollout paused = Progressing();
  paused.set_state(v1::ROLLOUT_STATE_PAUSED);
  EXPECT_THAT(AdvanceRollout(paused, Healthy(1), Healthy(1), "", Epoch()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("it is ROLLOUT_STATE_PAUSED; advance needs PROGRESSING")));
}

TEST(DeployOperatorActionsTest, AbortFromAnyLiveState) {
  for (v1::RolloutState state : {v1::ROLLOUT_STATE_PROGRESSING, v1::ROLLOUT_STATE_PAUSED,
                                 v1::ROLLOUT_STATE_COMPLETED}) {
    v1::Rollout rollout = Progressing();
    rollout.set_state(state);
    absl::StatusOr<v1::Rollout> aborted = AbortRollout(rollout, "bad build");
    ASSERT_THAT(aborted, IsOk());
    EXPECT_EQ(aborted->state(), v1::ROLLOUT_STATE_ABORTED);
    EXPECT_EQ(aborted->state_reason(), "aborted by operator: bad build");
  }
  for (v1::RolloutState state : {v1::ROLLOUT_STATE_ABORTED, v1::ROLLOUT_STATE_ROLLED_BACK}) {
    v1::Rollout rollout = Progressing();
    rollout.set_state(state);
    EXPECT_THAT(AbortRollout(rollout, ""),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr(absl::StrCat("it is ", v1::RolloutState_Name(state)))));
  }
}

}  // namespace
}  // namespace weightpath::deploy
