// The automatic side of a rollout: read the gates, then hold, advance,
// pause, roll back or complete.
#pragma once

#include <optional>
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
  v1::CohortOutcomes members;      // the current stage's own members
  v1::CohortOutcomes control;      // control outcomes since the stage opened
  v1::CohortOutcomes all_members;  // every member so far, all stages
  std::vector<GateReading> gates;
  // One per failure gate when the rollout has gates.sequential and the
  // stage has control devices; empty otherwise.
  std::vector<SequentialGateReading> sequential_gates;
  absl::Duration bake_left = absl::ZeroDuration();
  // A COMPLETED rollout within its watch: members whose latest report since
  // completion is a build failure. Unset otherwise.
  std::optional<uint64_t> failures_after_completion;
  // The current stage's horizon at the latest (StageHorizon); InfinitePast
  // when not judged (not PROGRESSING).
  absl::Time horizon = absl::InfinitePast();
  absl::Duration reach_timeout = kDefaultReachTimeout;
};

// gates.advance: "at_horizon", or empty with gates.sequential.
bool AdvancesAtHorizon(const v1::Rollout& rollout);

// When the current stage reaches its horizon at the latest: stage opened +
// horizon_seconds, or + the longer of the bake and reach timeout + report
// timeout (by then every member has concluded, timed out or is unreached).
absl::Time StageHorizon(const v1::Rollout& rollout, absl::Duration reach_timeout);

// "engine gate: Fisher's exact p 0.0031 <= 0.005 (members 38/1000 failed, control 81/4000)"
std::string DescribeHorizonTest(const SequentialGateReading& reading);

// 0 in the rollout means one day.
absl::Duration WatchAfterCompletion(const v1::Rollout& rollout);

// Every count is the current stage's own (CurrentStageCohorts): its
// members and the control devices' outcomes since it opened.
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
//  With gates.advance at_horizon (AdvancesAtHorizon), once baked and with
//  the reporting minimum (of the members that can answer): advance early
//  when every sequential gate passes (not the last stage), else hold until
//  the horizon (every member settled, or StageHorizon); there, a gate whose
//  Fisher test rejects pauses, and otherwise the stage advances or
//  completes. With on_pass:
//  6. the last stage holds until every member it admitted has settled
//     (concluded, or unreached: Settled), so a rollout never completes
//     while a device that had to change has not said how it went;
//  7. otherwise advance to the next stage, or complete after the last.
// Other states give kUnchanged with the counts filled in for display; a
// COMPLETED rollout within its watch also gets failures_after_completion.
// `members`/`control` come from SplitFleet (all stages' members).
RolloutVerdict EvaluateRollout(const v1::Rollout& rollout, const std::vector<CohortDevice>& members,
                               const std::vector<CohortDevice>& control, absl::Time now,
                               absl::Duration reach_timeout = kDefaultReachTimeout);

// The rollout after the verdict: counts and sequential gates stored,
// state/stage/reason moved, stage clocks started for a new stage,
// completed_at set on completion. kHold and kUnchanged change only those
// (and the reason, for kHold; failures_after_completion when watching).
v1::Rollout ApplyVerdict(const v1::Rollout& rollout, const RolloutVerdict& verdict, absl::Time now);

// Moves a rollout to `stage` at `now` (used by the evaluation and by the
// operator's advance).
void EnterStage(uint32_t stage, absl::Time now, v1::Rollout* rollout);

}  // namespace weightpath::deploy
