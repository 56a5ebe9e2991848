#include "deploy/rollout_evaluation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/proto_time.h"
#include "deploy/stage_text.h"

namespace weightpath::deploy {
namespace {

// Leaves headroom for floating-point noise when a delta equals its limit.
constexpr double kRateEpsilon = 1e-9;

GateReading Read(std::string gate, double member_rate, double control_rate, double max_delta) {
  GateReading reading;
  reading.gate = std::move(gate);
  reading.member_rate = member_rate;
  reading.control_rate = control_rate;
  reading.max_delta = max_delta;
  reading.breached = member_rate - control_rate > max_delta + kRateEpsilon;
  return reading;
}

}  // namespace

std::vector<GateReading> ReadGates(const v1::HealthGates& gates, const v1::CohortOutcomes& members,
                                   const v1::CohortOutcomes& control) {
  return {
      Read("boot", BootFailureRate(members), BootFailureRate(control),
           gates.max_boot_failure_delta()),
      Read("engine", EngineFailureRate(members), EngineFailureRate(control),
           gates.max_engine_failure_delta()),
      Read("task", TaskFailureRate(members), TaskFailureRate(control),
           gates.max_task_failure_delta()),
  };
}

std::string DescribeGate(const GateReading& reading) {
  double delta = reading.member_rate - reading.control_rate;
  return absl::StrFormat("%s gate: members %.3f vs control %.3f, delta %.3f %s %.3f",
                         reading.gate, reading.member_rate, reading.control_rate, delta,
                         reading.breached ? ">" : "<=", reading.max_delta);
}

absl::string_view RolloutStepName(RolloutStep step) {
  switch (step) {
    case RolloutStep::kUnchanged:
      return "unchanged";
    case RolloutStep::kHold:
      return "hold";
    case RolloutStep::kAdvance:
      return "advance";
    case RolloutStep::kPause:
      return "pause";
    case RolloutStep::kRollback:
      return "rollback";
    case RolloutStep::kComplete:
      return "complete";
  }
  return "unknown";
}

RolloutVerdict EvaluateRollout(const v1::Rollout& rollout, const std::vector<CohortDevice>& members,
                               const std::vector<CohortDevice>& control, absl::Time now) {
  RolloutVerdict verdict;
  verdict.stage = rollout.current_stage();
  verdict.members = CountMembers(rollout, members, now);
  verdict.control = CountControl(control);
  verdict.gates = ReadGates(rollout.gates(), verdict.members, verdict.control);
  verdict.sequential_gates = JudgeSequentialGates(rollout, members, control, now);
  if (rollout.state() != v1::ROLLOUT_STATE_PROGRESSING ||
      rollout.current_stage() >= static_cast<uint32_t>(rollout.stages_size())) {
    verdict.reason = absl::StrCat("no automatic step in state ",
                                  v1::RolloutState_Name(rollout.state()));
    return verdict;
  }
  const v1::RolloutStage& stage = rollout.stages(rollout.current_stage());
  // Operators read the reason: the stage counted from 1, as every view shows it.
  const std::string at = StageOf(rollout.current_stage(), rollout.stages_size());
  uint64_t required =
      std::min<uint64_t>(stage.min_reporting_devices(), verdict.members.devices());
  uint64_t concluded = Concluded(verdict.members);

  if (concluded >= required) {
    std::vector<std::string> breaches;
    for (const GateReading& reading : verdict.gates) {
      if (reading.breached) breaches.push_back(DescribeGate(reading));
    }
    if (!breaches.empty()) {
      verdict.step =
          rollout.gates().rollback_on_breach() ? RolloutStep::kRollback : RolloutStep::kPause;
      verdict.reason = absl::StrCat(at, ": ", absl::StrJoin(breaches, "; "));
      return verdict;
    }
  }
  std::vector<std::string> failed;
  std::vector<std::string> unsettled;
  for (const SequentialGateReading& reading : verdict.sequential_gates) {
    if (reading.verdict == GateVerdict::kFail) failed.push_back(DescribeSequentialGate(reading));
    if (reading.verdict == GateVerdict::kInconclusive) {
      unsettled.push_back(DescribeSequentialGate(reading));
    }
  }
  if (!failed.empty()) {
    verdict.step =
        rollout.gates().rollback_on_breach() ? RolloutStep::kRollback : RolloutStep::kPause;
    verdict.reason =
        absl::StrCat(at, ": ", absl::StrJoin(failed, "; "));
    return verdict;
  }

  absl::Time bake_end =
      FromProtoTime(rollout.stage_started_at()) + absl::Seconds(stage.min_bake_seconds());
  if (now < bake_end) {
    verdict.step = RolloutStep::kHold;
    verdict.bake_left = bake_end - now;
    verdict.reason = absl::StrCat(at, ": baking, ", FormatSeconds(verdict.bake_left), " left");
    return verdict;
  }
  if (concluded < required) {
    verdict.step = RolloutStep::kHold;
    verdict.reason = absl::StrCat(
        at, ": ", concluded, " of ", required,
        required == 1 ? " required member has concluded" : " required members have concluded");
    return verdict;
  }
  if (!unsettled.empty()) {
    verdict.step = RolloutStep::kHold;
    verdict.reason =
        absl::StrCat(at, ": ", absl::StrJoin(unsettled, "; "));
    return verdict;
  }
  if (rollout.current_stage() + 1 >= static_cast<uint32_t>(rollout.stages_size())) {
    verdict.step = RolloutStep::kComplete;
    verdict.reason = absl::StrCat(at, " passed its gates; complete");
    return verdict;
  }
  verdict.step = RolloutStep::kAdvance;
  verdict.stage = rollout.current_stage() + 1;
  verdict.reason = absl::StrCat(at, " passed its gates; advanced to ",
                                StageOf(verdict.stage, rollout.stages_size()), " (",
                                rollout.stages(verdict.stage).percent(), "%)");
  return verdict;
}

void EnterStage(uint32_t stage, absl::Time now, v1::Rollout* rollout) {
  rollout->set_current_stage(stage);
  *rollout->mutable_stage_started_at() = ToProtoTime(now);
  // Stages only move forward, so appending keeps entry times by stage index;
  // a rollout stored without them gets `now` for every missing stage.
  while (static_cast<uint32_t>(rollout->stage_entered_at_size()) <= stage) {
    *rollout->add_stage_entered_at() = ToProtoTime(now);
  }
}

v1::Rollout ApplyVerdict(const v1::Rollout& rollout, const RolloutVerdict& verdict, absl::Time now) {
  v1::Rollout next = rollout;
  *next.mutable_members() = verdict.members;
  *next.mutable_control() = verdict.control;
  next.clear_sequential_gates();
  for (const SequentialGateReading& reading : verdict.sequential_gates) {
    *next.add_sequential_gates() = SequentialGateStatusOf(reading);
  }
  switch (verdict.step) {
    case RolloutStep::kUnchanged:
      break;
    case RolloutStep::kHold:
      next.set_state_reason(verdict.reason);
      break;
    case RolloutStep::kAdvance:
      EnterStage(verdict.stage, now, &next);
      next.set_state_reason(verdict.reason);
      break;
    case RolloutStep::kPause:
      next.set_state(v1::ROLLOUT_STATE_PAUSED);
      next.set_state_reason(absl::StrCat("paused by gate: ", verdict.reason));
      break;
    case RolloutStep::kRollback:
      next.set_state(v1::ROLLOUT_STATE_ROLLED_BACK);
      next.set_state_reason(absl::StrCat("rolled back by gate: ", verdict.reason));
      break;
    case RolloutStep::kComplete:
      next.set_state(v1::ROLLOUT_STATE_COMPLETED);
      next.set_state_reason(verdict.reason);
      break;
  }
  return next;
}

}  // namespace weightpath::deploy
