#include "deploy/resolve_interval.h"

#include <algorithm>

namespace weightpath::deploy {

uint32_t SuggestedResolveIntervalSeconds(const std::vector<v1::Rollout>& rollouts,
                                         const Labels& labels,
                                         policy::HardwareClass hardware_class,
                                         const ResolveIntervalSettings& settings) {
  absl::Duration interval = settings.steady;
  for (const v1::Rollout& rollout : rollouts) {
    if (rollout.state() != v1::ROLLOUT_STATE_PROGRESSING &&
        rollout.state() != v1::ROLLOUT_STATE_PAUSED) {
      continue;
    }
    if (!Matches(rollout.selector(), labels, hardware_class)) continue;
    absl::Duration wanted = rollout.stage_resolve_interval_seconds() > 0
                                ? absl::Seconds(rollout.stage_resolve_interval_seconds())
                                : settings.during_rollout;
    if (rollout.current_stage() < static_cast<uint32_t>(rollout.stages_size())) {
      const v1::RolloutStage& stage = rollout.stages(rollout.current_stage());
      if (stage.report_timeout_seconds() > 0) {
        wanted = std::min(wanted, absl::Seconds(stage.report_timeout_seconds()) / 3);
      }
    }
    interval = std::min(interval, std::max(wanted, settings.floor));
  }
  return static_cast<uint32_t>(absl::ToInt64Seconds(std::max(interval, settings.floor)));
}

}  // namespace weightpath::deploy
