#include "server/rollout/rollout_reconciler.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_time.h"
#include "deploy/cohort_outcomes.h"
#include "server/rollout/rollout_fleet.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {

std::optional<v1::AuditEvent> RolloutStepAuditEvent(const v1::Rollout& rollout,
                                                    const v1::Rollout& next,
                                                    const deploy::RolloutVerdict& verdict,
                                                    absl::Time now) {
  const char* action = nullptr;
  switch (verdict.step) {
    case deploy::RolloutStep::kAdvance:
      action = "RolloutAdvanced";
      break;
    case deploy::RolloutStep::kPause:
      action = "RolloutPaused";
      break;
    case deploy::RolloutStep::kRollback:
      action = "RolloutRolledBack";
      break;
    case deploy::RolloutStep::kComplete:
      action = "RolloutCompleted";
      break;
    case deploy::RolloutStep::kHold:
    case deploy::RolloutStep::kUnchanged:
      return std::nullopt;
  }
  // The gates that stopped it: breached delta gates, failed sequential
  // gates, and sequential gates whose test rejected at the horizon.
  std::vector<std::string> gates;
  if (verdict.step == deploy::RolloutStep::kPause || verdict.step == deploy::RolloutStep::kRollback) {
    for (const deploy::GateReading& gate : verdict.gates) {
      if (gate.breached) gates.push_back(gate.gate);
    }
    for (const deploy::SequentialGateReading& gate : verdict.sequential_gates) {
      const bool rejected_at_horizon =
          gate.horizon_alpha > 0 && gate.horizon_p_value <= gate.horizon_alpha;
      if ((gate.verdict == deploy::GateVerdict::kFail || rejected_at_horizon) &&
          std::find(gates.begin(), gates.end(), gate.gate) == gates.end()) {
        gates.push_back(gate.gate);
      }
    }
  }
  v1::AuditEvent event;
  *event.mutable_time() = ToProtoTime(now);
  event.set_identity(kRolloutDriverIdentity);
  event.set_role("system");
  event.set_rpc(action);
  event.set_target(rollout.id());
  // Protobuf text format, as the operators' calls' summaries read; stages
  // counted from 1, as every view shows them.
  std::string summary = absl::StrCat(
      "step: \"", deploy::RolloutStepName(verdict.step), "\" from_stage: ",
      rollout.current_stage() + 1, " to_stage: ", next.current_stage() + 1,
      " stages: ", rollout.stages_size(), " state: \"", v1::RolloutState_Name(next.state()), "\"");
  if (!gates.empty()) {
    absl::StrAppend(&summary, " gates: \"", absl::StrJoin(gates, ","), "\"");
  }
  event.set_request_summary(std::move(summary));
  event.set_result("OK");
  event.set_message(next.state_reason());
  return event;
}

RolloutReconciler::RolloutReconciler(RolloutDependencies dependencies)
    : deps_(std::move(dependencies)) {}

RolloutReconciler::~RolloutReconciler() { Stop(); }

absl::StatusOr<std::vector<ReconcileResult>> RolloutReconciler::ReconcileOnce() {
  const RolloutCache::ListingStart listing = deps_.cache->BeginListing();
  absl::StatusOr<std::vector<store::StoredRollout>> stored = deps_.store->ListRollouts();
  if (!stored.ok()) return stored.status();
  // A rollout deleted through another replica leaves this one's cache (and
  // so its resolves) and its metrics here.
  for (const std::string& deleted : deps_.cache->Replace(*stored, listing)) {
    spdlog::info("rollout {}: deleted", deleted);
    if (deps_.metrics != nullptr) deps_.metrics->RemoveRollout(deleted);
  }

  std::vector<ReconcileResult> results;
  const absl::Time now = deps_.now();
  // PROGRESSING rollouts move; COMPLETED ones within their watch keep
  // counting members that fail after completion.
  const auto evaluated = [now](const v1::Rollout& rollout) {
    if (rollout.state() == v1::ROLLOUT_STATE_PROGRESSING) return true;
    return rollout.state() == v1::ROLLOUT_STATE_COMPLETED && rollout.has_completed_at() &&
           now < FromProtoTime(rollout.completed_at()) + deploy::WatchAfterCompletion(rollout);
  };
  bool any_evaluated = false;
  for (const store::StoredRollout& each : *stored) {
    any_evaluated |= evaluated(each.rollout);
    if (deps_.metrics != nullptr) deps_.metrics->SetRollout(each.rollout);
  }
  if (!any_evaluated) return results;

  absl::StatusOr<FleetSnapshot> fleet = LoadFleetSnapshot(*deps_.store);
  if (!fleet.ok()) return fleet.status();
  for (const store::StoredRollout& each : *stored) {
    const v1::Rollout& rollout = each.rollout;
    if (!evaluated(rollout)) continue;
    const deploy::FleetSplit split = deploy::SplitFleet(rollout, FleetFor(*fleet, rollout.id()));
    const deploy::RolloutVerdict verdict =
        deploy::EvaluateRollout(rollout, split.members, split.control, now, deps_.reach_timeout);
    const v1::Rollout next = deploy::ApplyVerdict(rollout, verdict, now);
    if (rollout.state() == v1::ROLLOUT_STATE_COMPLETED &&
        next.failures_after_completion() == rollout.failures_after_completion()) {
      continue;  // nothing new since completion: no write
    }
    if (next.failures_after_completion() > rollout.failures_after_completion()) {
      spdlog::warn("rollout {}: {} member(s) failed after completion", rollout.id(),
                   next.failures_after_completion());
    }

    ReconcileResult result;
    result.rollout_id = rollout.id();
    result.step = verdict.step;
    result.stage = verdict.stage;
    result.reason = verdict.reason;
    absl::StatusOr<int64_t> revision = deps_.store->UpdateRollout(next, each.revision);
    if (revision.ok()) {
      result.stored = true;
      deps_.cache->Publish(next, *revision);
      if (deps_.metrics != nullptr) {
        deps_.metrics->SetRollout(next);
        if (verdict.step == deploy::RolloutStep::kPause ||
            verdict.step == deploy::RolloutStep::kRollback) {
          for (const deploy::GateReading& gate : verdict.gates) {
            if (gate.breached) deps_.metrics->CountGateBreach(rollout.id(), gate.gate);
          }
          for (const deploy::SequentialGateReading& gate : verdict.sequential_gates) {
            if (gate.verdict == deploy::GateVerdict::kFail) {
              deps_.metrics->CountGateBreach(rollout.id(), gate.gate);
            }
          }
        }
      }
      if (deps_.audit) {
        // Only here, after this replica's compare-and-swap won: a replica
        // that lost the race took no step and records none.
        if (std::optional<v1::AuditEvent> event = RolloutStepAuditEvent(rollout, next, verdict, now)) {
          deps_.audit(*std::move(event));
        }
      }
      if (verdict.step != deploy::RolloutStep::kHold && verdict.step != deploy::RolloutStep::kUnchanged) {
        spdlog::info("rollout {}: {} -> stage {}/{}: {}", rollout.id(),
                     std::string(deploy::RolloutStepName(verdict.step)), verdict.stage + 1,
                     rollout.stages_size(), verdict.reason);
      }
    } else if (revision.status().code() == absl::StatusCode::kAborted) {
      // Another replica or an operator wrote first; their state is newer.
      spdlog::debug("rollout {}: changed by another writer, next pass", rollout.id());
    } else {
      return revision.status();
    }
    results.push_back(std::move(result));
  }
  return results;
}

void RolloutReconciler::Start(absl::Duration interval) {
  if (thread_ != nullptr) return;
  thread_ = std::make_unique<std::thread>([this, interval] {
    do {
      absl::StatusOr<std::vector<ReconcileResult>> pass = ReconcileOnce();
      if (!pass.ok()) spdlog::warn("rollout reconcile: {}", pass.status().ToString());
    } while (!stop_.WaitForNotificationWithTimeout(interval));
  });
}

void RolloutReconciler::Stop() {
  if (thread_ == nullptr) return;
  if (!stop_.HasBeenNotified()) stop_.Notify();
  thread_->join();
  thread_.reset();
}

}  // namespace weightpath::server
