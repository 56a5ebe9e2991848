#include "deploy/resolve_interval.h"

#include <vector>

#include "deploy/rollout_validation.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_fixtures.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::deploy {
namespace {

using ::weightpath::deploy::testing::Epoch;
using ::weightpath::deploy::testing::FidelityForAgentic;
using ::weightpath::deploy::testing::MakeLabels;
using ::weightpath::testing::IsOk;

using HC = policy::HardwareClass;

TEST(DeployResolveIntervalTest, ShorterWhileALiveRolloutSelectsTheDevice) {
  absl::StatusOr<v1::Rollout> rollout =
      StartRollout(FidelityForAgentic("fid"), *policy::DefaultPolicy(), Epoch());
  ASSERT_THAT(rollout, IsOk());
  std::vector<v1::Rollout> rollouts = {*rollout};
  Labels agentic = MakeLabels({{"workload", "agentic"}});
  Labels chat = MakeLabels({{"workload", "chat"}});

  EXPECT_EQ(SuggestedResolveIntervalSeconds(rollouts, chat, HC::kX86Cpu), 3600u);
  EXPECT_EQ(SuggestedResolveIntervalSeconds(rollouts, agentic, HC::kX86Cpu), 300u);

  // A third of a 6-minute report timeout, so the member hears in time.
  rollouts[0].mutable_stages(0)->set_report_timeout_seconds(360);
  EXPECT_EQ(SuggestedResolveIntervalSeconds(rollouts, agentic, HC::kX86Cpu), 120u);
  // ...but never below the floor.
  rollouts[0].mutable_stages(0)->set_report_timeout_seconds(30);
  EXPECT_EQ(SuggestedResolveIntervalSeconds(rollouts, agentic, HC::kX86Cpu), 30u);

  rollouts[0].set_state(v1::ROLLOUT_STATE_PAUSED);
  EXPECT_EQ(SuggestedResolveIntervalSeconds(rollouts, agentic, HC::kX86Cpu), 30u);
  for (v1::RolloutState settled :
       {v1::ROLLOUT_STATE_COMPLETED, v1::ROLLOUT_STATE_ABORTED, v1::ROLLOUT_STATE_ROLLED_BACK}) {
    rollouts[0].set_state(settled);
    EXPECT_EQ(SuggestedResolveIntervalSeconds(rollouts, agentic, HC::kX86Cpu), 3600u);
  }

  ResolveIntervalSettings settings;
  settings.steady = absl::Minutes(20);
  EXPECT_EQ(SuggestedResolveIntervalSeconds(rollouts, agentic, HC::kX86Cpu, settings), 1200u);

  // The rollout's own interval while a stage is open, in place of the server's.
  rollouts[0].set_state(v1::ROLLOUT_STATE_PROGRESSING);
  rollouts[0].mutable_stages(0)->set_report_timeout_seconds(1800);
  rollouts[0].set_stage_resolve_interval_seconds(120);
  EXPECT_EQ(SuggestedResolveIntervalSeconds(rollouts, agentic, HC::kX86Cpu, settings), 120u);
  EXPECT_EQ(SuggestedResolveIntervalSeconds(rollouts, chat, HC::kX86Cpu, settings), 1200u);
}

}  // namespace
}  // namespace weightpath::deploy
