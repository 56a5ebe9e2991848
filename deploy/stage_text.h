// How rollout reasons spell a stage and a duration, so the server's state
// reasons and weightpathctl's views read the same: stages counted from 1
// ("stage 2 of 4", while Rollout.current_stage counts from 0) and durations
// in whole seconds ("25m 36s", not "25m35.5s").
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace weightpath::deploy {

// "stage <index + 1> of <count>".
std::string StageOf(uint32_t index, int count);

// Whole seconds, rounded, largest units first: "0s", "45s", "2m 5s", "1h 0m 3s".
std::string FormatSeconds(absl::Duration duration);

}  // namespace weightpath::deploy
