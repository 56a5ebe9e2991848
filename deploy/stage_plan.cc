#include "deploy/stage_plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "deploy/conditional_fail_test.h"
#include "deploy/sequential_gates.h"

namespace weightpath::deploy {

std::vector<v1::StagePlan> PlanStages(const v1::Rollout& rollout,
                                      const std::vector<uint64_t>& admitted_by_stage,
                                      uint64_t control_failures, uint64_t control_trials) {
  std::vector<v1::StagePlan> plans;
  const SequentialGateSettings settings = SequentialSettingsFor(rollout);
  const bool assumed = control_trials < kMinPlanTrials;
  const double base_rate =
      assumed ? kAssumedBaseRate
              : static_cast<double>(control_failures) / static_cast<double>(control_trials);
  uint64_t selected = 0;
  for (uint64_t count : admitted_by_stage) selected += count;
  uint64_t admitted_so_far = 0;
  for (int i = 0; i < rollout.stages_size(); ++i) {
    const uint64_t admitted =
        static_cast<size_t>(i) < admitted_by_stage.size() ? admitted_by_stage[i] : 0;
    admitted_so_far += admitted;
    v1::StagePlan plan;
    plan.set_stage(static_cast<uint32_t>(i));
    plan.set_members(admitted);
    plan.set_control(selected - admitted_so_far);
    plan.set_base_rate(base_rate);
    plan.set_base_rate_assumed(assumed);
    if (plan.control() == 0) {
      plan.set_note("no control devices: judged by the hard guards");
    } else if (!rollout.gates().has_sequential()) {
      plan.set_note("no sequential gates: judged by the hard guards");
    } else {
      plan.set_detectable_ratio(DetectableRatio(plan.members(), plan.control(), base_rate,
                                                settings.stage_false_pause_rate *
                                                    kHorizonShareOfFalsePauseRate));
      if (plan.detectable_ratio() == 0) {
        plan.set_note("too small: not even every member failing would be caught");
      } else if (plan.detectable_ratio() > settings.min_relative_increase) {
        plan.set_note(absl::StrFormat("too small for min_relative_increase %.3g",
                                      settings.min_relative_increase));
      }
    }
    plans.push_back(plan);
  }
  return plans;
}

std::string DescribeStagePlan(const v1::StagePlan& plan) {
  std::string out = absl::StrFormat("stage %d: %d member%s, %d control at %.1f%%%s", plan.stage() + 1,
                                    plan.members(), plan.members() == 1 ? "" : "s",
                                    plan.control(), 100 * plan.base_rate(),
                                    plan.base_rate_assumed() ? " (assumed)" : "");
  if (plan.detectable_ratio() > 0) {
    absl::StrAppend(&out, absl::StrFormat(": catches %.2gx with 80%% by its horizon",
                                          plan.detectable_ratio()));
  }
  if (!plan.note().empty()) absl::StrAppend(&out, " (", plan.note(), ")");
  return out;
}

}  // namespace weightpath::deploy
