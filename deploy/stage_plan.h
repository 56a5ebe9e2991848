// Planned power: what each stage of a rollout can catch by its horizon.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weightpath/v1/rollout.pb.h"

namespace weightpath::deploy {

// The base rate a plan assumes when the control has shown too little
// (fewer than kMinPlanTrials concluded devices).
inline constexpr double kAssumedBaseRate = 0.02;
inline constexpr uint64_t kMinPlanTrials = 50;

// One plan per stage, where `admitted_by_stage[s]` devices the selector
// matches join at stage s (AdmittingStage of their buckets; the rest of
// the selected devices are its control), at the engine failure rate the
// control shows
// (`control_failures` of `control_trials`): the members each stage admits,
// the devices left outside it, and DetectableRatio of the engine gate's
// horizon test (Fisher's exact at 0.7 of the stage's false-pause rate; the
// conditional e-process only adds to it). A stage at 100% has no control;
// a rollout without gates.sequential has no fail test; a stage whose ratio
// is above min_relative_increase is too small for it: each is said in
// `note`.
std::vector<v1::StagePlan> PlanStages(const v1::Rollout& rollout,
                                      const std::vector<uint64_t>& admitted_by_stage,
                                      uint64_t control_failures, uint64_t control_trials);

// "stage 1: 10 members, 990 control at 2.0%: catches 2.9x with 80% by its
// horizon (too small for min_relative_increase 1.5)"
std::string DescribeStagePlan(const v1::StagePlan& plan);

}  // namespace weightpath::deploy
