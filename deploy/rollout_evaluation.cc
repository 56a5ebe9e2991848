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

bool AdvancesAtHorizon(const v1::Rollout& rollout) {
  const std::string& advance = rollout.gates().advance();
  return advance == "at_horizon" || (advance.empty() && rollout.gates().has_sequential());
}

absl::Time StageHorizon(const v1::Rollout& rollout, absl::Duration reach_timeout) {
  if (rollout.current_stage() >= static_cast<uint32_t>(rollout.stages_size())) {
    return absl::InfiniteFuture();
  }
  const v1::RolloutStage& stage = rollout.stages(rollout.current_stage());
  const absl::Time opened =
      rollout.stage_entered_at_size() > static_cast<int>(rollout.current_stage())
          ? FromProtoTime(rollout.stage_entered_at(rollout.current_stage()))
          : FromProtoTime(rollout.stage_started_at());
  if (stage.horizon_seconds() > 0) return opened + absl::Seconds(stage.horizon_seconds());
  // By then every member is told and timed out, or unreached.
  return opened + std::max(absl::Seconds(stage.min_bake_seconds()),
                           reach_timeout + absl::Seconds(stage.report_timeout_seconds()));
}

std::string DescribeHorizonTest(const SequentialGateReading& reading) {
  const FailureCounts& totals = reading.totals;
  return absl::StrFormat(
      "%s gate: Fisher's exact p %.3g <= %.3g (members %d/%d failed, control %d/%d)", reading.gate,
      reading.horizon_p_value, reading.horizon_alpha, totals.member_failures, totals.member_trials,
      totals.control_failures, totals.control_trials);
}

absl::Duration WatchAfterCompletion(const v1::Rollout& rollout) {
  return rollout.watch_after_completion_seconds() == 0
             ? absl::Hours(24)
             : absl::Seconds(rollout.watch_after_completion_seconds());
}

RolloutVerdict EvaluateRollout(const v1::Rollout& rollout, const std::vector<CohortDevice>& members,
                               const std::vector<CohortDevice>& control, absl::Time now,
                               absl::Duration reach_timeout) {
  RolloutVerdict verdict;
  verdict.stage = rollout.current_stage();
  const FleetSplit stage_cohorts = CurrentStageCohorts(rollout, FleetSplit{members, control});
  verdict.members = CountMembers(rollout, stage_cohorts.members, now, reach_timeout);
  verdict.control = CountControl(stage_cohorts.control);
  verdict.all_members = CountMembers(rollout, members, now, reach_timeout);
  verdict.gates = ReadGates(rollout.gates(), verdict.members, verdict.control);
  verdict.reach_timeout = reach_timeout;
  verdict.sequential_gates = JudgeSequentialGates(rollout, stage_cohorts.members,
                                                  stage_cohorts.control, now, reach_timeout);
  if (rollout.state() == v1::ROLLOUT_STATE_COMPLETED && rollout.has_completed_at()) {
    const absl::Time completed = FromProtoTime(rollout.completed_at());
    if (now < completed + WatchAfterCompletion(rollout)) {
      uint64_t failed = 0;
      for (const CohortDevice& member : members) {
        if (IsBuildFailure(member.outcomes.lifecycle) && member.outcomes.lifecycle_at >= completed) {
          ++failed;
        }
      }
      verdict.failures_after_completion = failed;
    }
  }
  if (rollout.state() != v1::ROLLOUT_STATE_PROGRESSING ||
      rollout.current_stage() >= static_cast<uint32_t>(rollout.stages_size())) {
    verdict.reason = absl::StrCat("no automatic step in state ",
                                  v1::RolloutState_Name(rollout.state()));
    return verdict;
  }
  const v1::RolloutStage& stage = rollout.stages(rollout.current_stage());
  verdict.horizon = StageHorizon(rollout, reach_timeout);
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
  const bool at_horizon = AdvancesAtHorizon(rollout);
  if (at_horizon) {
    // Members that cannot answer (never told, or out of disk) are not
    // waited for: the minimum is of those that can.
    required = std::min<uint64_t>(
        required, verdict.members.devices() - verdict.members.unreached() -
                      std::min(verdict.members.cache_full(),
                               verdict.members.devices() - verdict.members.unreached()));
  }
  if (concluded < required) {
    verdict.step = RolloutStep::kHold;
    verdict.reason = absl::StrCat(
        at, ": ", concluded, " of ", required,
        required == 1 ? " required member has concluded" : " required members have concluded");
    return verdict;
  }
  const bool last = rollout.current_stage() + 1 >= static_cast<uint32_t>(rollout.stages_size());
  const uint64_t unsettled_members = verdict.members.devices() - Settled(verdict.members);
  const auto advance = [&](absl::string_view why) {
    if (last) {
      verdict.step = RolloutStep::kComplete;
      verdict.reason = absl::StrCat(at, " ", why, "; complete");
      return verdict;
    }
    verdict.step = RolloutStep::kAdvance;
    verdict.stage = rollout.current_stage() + 1;
    verdict.reason = absl::StrCat(at, " ", why, "; advanced to ",
                                  StageOf(verdict.stage, rollout.stages_size()), " (",
                                  rollout.stages(verdict.stage).percent(), "%)");
    return verdict;
  };
  if (at_horizon) {
    const bool reached = unsettled_members == 0 || now >= verdict.horizon;
    if (!reached) {
      // A positive pass of every sequential gate may advance early; the
      // last stage waits for its members whatever the gates say.
      if (!last && !verdict.sequential_gates.empty() && unsettled.empty()) {
        return advance("passed its gates");
      }
      verdict.step = RolloutStep::kHold;
      verdict.reason = absl::StrCat(
          at, ": ", unsettled_members, " of ", verdict.members.devices(),
          verdict.members.devices() == 1 ? " member it admitted has" : " members it admitted have",
          " not concluded yet; horizon at ",
          absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", verdict.horizon, absl::UTCTimeZone()));
      return verdict;
    }
    std::vector<std::string> failed_at_horizon;
    for (const SequentialGateReading& reading : verdict.sequential_gates) {
      if (reading.horizon_alpha > 0 && reading.horizon_p_value <= reading.horizon_alpha) {
        failed_at_horizon.push_back(DescribeHorizonTest(reading));
      }
    }
    if (!failed_at_horizon.empty()) {
      verdict.step =
          rollout.gates().rollback_on_breach() ? RolloutStep::kRollback : RolloutStep::kPause;
      verdict.reason =
          absl::StrCat(at, ": at its horizon, ", absl::StrJoin(failed_at_horizon, "; "));
      return verdict;
    }
    return advance("reached its horizon with no failed gate");
  }
  if (!unsettled.empty()) {
    verdict.step = RolloutStep::kHold;
    verdict.reason =
        absl::StrCat(at, ": ", absl::StrJoin(unsettled, "; "));
    return verdict;
  }
  if (last && unsettled_members > 0) {
    verdict.step = RolloutStep::kHold;
    verdict.reason = absl::StrCat(
        at, ": ", unsettled_members, " of ", verdict.members.devices(),
        verdict.members.devices() == 1 ? " member it admitted has" : " members it admitted have",
        " not concluded yet (each has its report timeout from its first shaped resolve)");
    return verdict;
  }
  return advance("passed its gates");
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
  *next.mutable_all_members() = verdict.all_members;
  if (verdict.horizon != absl::InfinitePast()) *next.mutable_stage_horizon() = ToProtoTime(verdict.horizon);
  if (verdict.failures_after_completion.has_value()) {
    next.set_failures_after_completion(*verdict.failures_after_completion);
  }
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
      *next.mutable_stage_horizon() = ToProtoTime(StageHorizon(next, verdict.reach_timeout));
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
      *next.mutable_completed_at() = ToProtoTime(now);
      break;
  }
  return next;
}

}  // namespace weightpath::deploy
