// The automatic side of a rollout: read the gates, then hold, advance,
// pause, roll back or complete.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "deploy/cohort_outcomes.h"
#include "deploy/sequential_gates.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::deploy {

// One health gate: the members' failure rate may exceed the control group's
// by at most `max_delta`.
struct GateReading {
  std::string gate;  // "boot", "engine" or "task"
  double member_rate = 0;
  double control_rate = 0;
  double max_delta = 0;
  bool breached = false;
};

std::vector<GateReading> ReadGates(const v1::HealthGates& gates, const v1::CohortOutcomes& members,
                                   const v1::CohortOutcomes& control);

// "task gate: members 0.400 vs control 0.050, delta 0.350 > 0.100"
std::string DescribeGate(const GateReading& reading);

enum class RolloutStep {
  kUnchanged,  // not PROGRESSING: nothing automatic happens
  kHold,       // stay at the current stage; `reason` says why
  kAdvance,    // move to `stage`
  kPause,      // a gate tripped
  kRollback,   // a gate tripped and gates.rollback_on_breach is set
  kComplete,   // the last stage passed
};

absl::string_view RolloutStepName(RolloutStep step);

struct RolloutVerdict {
  RolloutStep step = RolloutStep::kUnchanged;
  uint32_t stage = 0;  // the stage after the step
  std::string reason;
  v1::CohortOutcomes members;
  v1::CohortOutcomes control;
  std::vector<GateReading> gates;
  // One per failure gate when the rollout has gates.sequential and the
  // stage has control devices; empty otherwise.
  std::vector<SequentialGateReading> sequential_gates;
  absl::Duration bake_left = absl::ZeroDuration();
};

// For a PROGRESSING rollout, in this order:
//  1. once the stage has its evidence (concluded members >= the stage's
//     min_reporting_devices, capped at the member count so a small cohort
//     cannot stall), any breached gate pauses it, or rolls it back when
//     gates.rollback_on_breach is set; a gate may trip during the bake;
//  2. with gates.sequential, a sequential gate that fails does the same, at
//     any time (its error rate holds however often it is read);
//  3. hold while min_bake_seconds since the stage started have not passed;
//  4. hold while fewer members than required have concluded;
//  5. with gates.sequential, hold while any sequential gate is not `pass`;
//  6. otherwise advance to the next stage, or complete after the last.
// Other states give kUnchanged with the counts filled in for display.
// `members`/`control` come from SplitFleet.
RolloutVerdict EvaluateRollout(const v1::Rollout& rollout, const std::vector<CohortDevice>& members,
                               const std::vector<CohortDevice>& control, absl::Time now);

// The rollout after the verdict: counts and sequential gates stored,
// state/stage/reason moved, stage clocks started for a new stage. kHold and
// kUnchanged change only those (and the reason, for kHold).
v1::Rollout ApplyVerdict(const v1::Rollout& rollout, const RolloutVerdict& verdict, absl::Time now);

// Moves a rollout to `stage` at `now` (used by the evaluation and by the
// operator's advance).
void EnterStage(uint32_t stage, absl::Time now, v1::Rollout* rollout);

}  // namespace weightpath::deploy
