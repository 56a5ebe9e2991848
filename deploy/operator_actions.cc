#include "deploy/operator_actions.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_time.h"
#include "deploy/rollout_evaluation.h"
#include "deploy/stage_text.h"

namespace weightpath::deploy {
namespace {

absl::Status WrongState(const v1::Rollout& rollout, absl::string_view action,
                        absl::string_view allowed) {
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot ", action, " rollout '", rollout.id(), "': it is ",
      v1::RolloutState_Name(rollout.state()), "; ", action, " needs ", allowed));
}

std::string ReasonOr(absl::string_view reason, absl::string_view fallback) {
  return std::string(reason.empty() ? fallback : reason);
}

}  // namespace

absl::StatusOr<v1::Rollout> PauseRollout(const v1::Rollout& rollout, absl::string_view reason) {
  if (rollout.state() != v1::ROLLOUT_STATE_PROGRESSING) {
    return WrongState(rollout, "pause", "PROGRESSING");
  }
  v1::Rollout next = rollout;
  next.set_state(v1::ROLLOUT_STATE_PAUSED);
  next.set_state_reason(absl::StrCat("paused by operator: ", ReasonOr(reason, "no reason given")));
  return next;
}

absl::StatusOr<v1::Rollout> ResumeRollout(const v1::Rollout& rollout, absl::string_view reason,
                                          absl::Time now) {
  if (rollout.state() != v1::ROLLOUT_STATE_PAUSED) {
    return WrongState(rollout, "resume", "PAUSED");
  }
  v1::Rollout next = rollout;
  next.set_state(v1::ROLLOUT_STATE_PROGRESSING);
  *next.mutable_stage_started_at() = ToProtoTime(now);
  next.set_state_reason(absl::StrCat("resumed by operator: ", ReasonOr(reason, "no reason given")));
  return next;
}

absl::StatusOr<v1::Rollout> AdvanceRollout(const v1::Rollout& rollout,
                                           const v1::CohortOutcomes& members,
                                           const v1::CohortOutcomes& control,
                                           absl::string_view reason, absl::Time now) {
  if (rollout.state() != v1::ROLLOUT_STATE_PROGRESSING) {
    return WrongState(rollout, "advance", "PROGRESSING (resume a paused rollout first)");
  }
  std::vector<std::string> breaches;
  for (const GateReading& reading : ReadGates(rollout.gates(), members, control)) {
    if (reading.breached) breaches.push_back(DescribeGate(reading));
  }
  if (!breaches.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot advance rollout '", rollout.id(), "' at ",
                     StageOf(rollout.current_stage(), rollout.stages_size()),
                     " past a tripped gate: ",
                     absl::StrJoin(breaches, "; ")));
  }
  v1::Rollout next = rollout;
  *next.mutable_members() = members;
  *next.mutable_control() = control;
  std::string why = ReasonOr(reason, "no reason given");
  if (rollout.current_stage() + 1 >= static_cast<uint32_t>(rollout.stages_size())) {
    next.set_state(v1::ROLLOUT_STATE_COMPLETED);
    next.set_state_reason(absl::StrCat("completed by operator: ", why));
    *next.mutable_completed_at() = ToProtoTime(now);
    return next;
  }
  EnterStage(rollout.current_stage() + 1, now, &next);
  next.set_state_reason(absl::StrCat("advanced by operator to ",
                                     StageOf(next.current_stage(), next.stages_size()), ": ", why));
  return next;
}

absl::StatusOr<v1::Rollout> AbortRollout(const v1::Rollout& rollout, absl::string_view reason) {
  switch (rollout.state()) {
    case v1::ROLLOUT_STATE_PROGRESSING:
    case v1::ROLLOUT_STATE_PAUSED:
    case v1::ROLLOUT_STATE_COMPLETED:
      break;
    default:
      return WrongState(rollout, "abort", "PROGRESSING, PAUSED or COMPLETED");
  }
  v1::Rollout next = rollout;
  next.set_state(v1::ROLLOUT_STATE_ABORTED);
  next.set_state_reason(absl::StrCat("aborted by operator: ", ReasonOr(reason, "no reason given")));
  return next;
}

}  // namespace weightpath::deploy
