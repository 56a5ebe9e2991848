// How soon a device should resolve again, suggested by the server in
// resolve_interval_seconds (the agent adds its own jitter).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "deploy/label_selector.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::deploy {

// Operator settings, not measurements.
struct ResolveIntervalSettings {
  absl::Duration steady = absl::Hours(1);          // nothing in flight for the device
  absl::Duration during_rollout = absl::Minutes(5);  // a live rollout selects it
  absl::Duration floor = absl::Seconds(30);        // never ask for less
  // How long a device waits before trying again a build that failed on it
  // (failed_build_retry_seconds); zero: only when the answer changes.
  absl::Duration failed_build_retry = absl::ZeroDuration();
};

// `steady` unless a PROGRESSING or PAUSED rollout's selector matches the
// device; then the rollout's stage_resolve_interval_seconds (0:
// `during_rollout`), shortened to a third of the current stage's
// report timeout so a member hears of its new decision well before it would
// count as silent (and an abort reaches paused members soon), but never
// under `floor`. Applies whether or not the device is a member yet: it may
// be admitted at the next stage.
uint32_t SuggestedResolveIntervalSeconds(const std::vector<v1::Rollout>& rollouts,
                                         const Labels& labels,
                                         policy::HardwareClass hardware_class,
                                         const ResolveIntervalSettings& settings = {});

}  // namespace weightpath::deploy
