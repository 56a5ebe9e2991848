// What an operator can do to a rollout, as pure transitions. Each returns
// the new rollout, or FAILED_PRECONDITION naming the rollout's current state.
#pragma once

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::deploy {

// PROGRESSING -> PAUSED. Members keep their shaped decision; nobody new joins.
absl::StatusOr<v1::Rollout> PauseRollout(const v1::Rollout& rollout, absl::string_view reason);

// PAUSED -> PROGRESSING. The stage's bake clock restarts at `now`; report
// timeouts keep running from when each member joined, and a gate that
// tripped trips again unless the members' reports have changed.
absl::StatusOr<v1::Rollout> ResumeRollout(const v1::Rollout& rollout, absl::string_view reason,
                                          absl::Time now);

// PROGRESSING -> the next stage (or COMPLETED from the last), skipping the
// bake time and the minimum reporting count. It does NOT override a gate:
// with any gate breached on the given counts (typically from CountMembers /
// CountControl just before), FAILED_PRECONDITION naming the gate. A paused
// rollout must be resumed first, so the operator sees the pause reason.
absl::StatusOr<v1::Rollout> AdvanceRollout(const v1::Rollout& rollout,
                                           const v1::CohortOutcomes& members,
                                           const v1::CohortOutcomes& control,
                                           absl::string_view reason, absl::Time now);

// PROGRESSING, PAUSED or COMPLETED -> ABORTED: the rollout stops shaping
// decisions, so every member gets its non-rollout decision at its next
// resolve. Already ABORTED or ROLLED_BACK: FAILED_PRECONDITION.
absl::StatusOr<v1::Rollout> AbortRollout(const v1::Rollout& rollout, absl::string_view reason);

}  // namespace weightpath::deploy
