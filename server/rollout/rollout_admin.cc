#include "server/rollout/rollout_admin.h"

#include "absl/strings/str_cat.h"
#include "common/field_violation.h"
#include "deploy/cohort_outcomes.h"
#include "deploy/operator_actions.h"
#include "deploy/rollout_validation.h"
#include "server/rollout/rollout_fleet.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

absl::Status RequireId(const std::string& id) {
  if (id.empty()) return InvalidArgumentForField("id", "id: must name a rollout");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Rollout> RolloutAdmin::Create(const v1::Rollout& spec) {
  absl::StatusOr<v1::Rollout> started = deploy::StartRollout(spec, *deps_.policy(), deps_.now());
  if (!started.ok()) return started.status();
  absl::StatusOr<int64_t> revision = deps_.store->CreateRollout(*started);
  if (!revision.ok()) return revision.status();
  deps_.cache->Publish(*started, *revision);
  if (deps_.metrics != nullptr) deps_.metrics->SetRollout(*started);
  spdlog::info("rollout {}: created, stage 1/{} at {}%", started->id(), started->stages_size(),
               started->stages(0).percent());
  return started;
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Get(const std::string& id) {
  if (absl::Status valid = RequireId(id); !valid.ok()) return valid;
  absl::StatusOr<store::StoredRollout> stored = deps_.store->GetRollout(id);
  if (!stored.ok()) return stored.status();
  return stored->rollout;
}

absl::StatusOr<std::vector<v1::Rollout>> RolloutAdmin::List() {
  absl::StatusOr<std::vector<store::StoredRollout>> stored = deps_.store->ListRollouts();
  if (!stored.ok()) return stored.status();
  std::vector<v1::Rollout> rollouts;
  rollouts.reserve(stored->size());
  for (store::StoredRollout& each : *stored) rollouts.push_back(std::move(each.rollout));
  return rollouts;
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Transact(const std::string& id,
                                                   const Transition& transition) {
  if (absl::Status valid = RequireId(id); !valid.ok()) return valid;
  absl::Status last = absl::OkStatus();
  for (int attempt = 0; attempt < kMaxRevisionRetries; ++attempt) {
    absl::StatusOr<store::StoredRollout> stored = deps_.store->GetRollout(id);
    if (!stored.ok()) return stored.status();
    absl::StatusOr<v1::Rollout> next = transition(stored->rollout);
    if (!next.ok()) return next.status();
    absl::StatusOr<int64_t> revision = deps_.store->UpdateRollout(*next, stored->revision);
    if (revision.ok()) {
      deps_.cache->Publish(*next, *revision);
      if (deps_.metrics != nullptr) deps_.metrics->SetRollout(*next);
      return next;
    }
    if (revision.status().code() != absl::StatusCode::kAborted) return revision.status();
    last = revision.status();
  }
  return absl::AbortedError(absl::StrCat("rollout '", id, "' kept changing under ",
                                         kMaxRevisionRetries, " attempts: ", last.message()));
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Pause(const std::string& id, const std::string& reason) {
  return Transact(id, [&](const v1::Rollout& rollout) {
    return deploy::PauseRollout(rollout, reason);
  });
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Resume(const std::string& id, const std::string& reason) {
  return Transact(id, [&](const v1::Rollout& rollout) {
    return deploy::ResumeRollout(rollout, reason,
                                 deps_.now());
  });
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Abort(const std::string& id, const std::string& reason) {
  return Transact(id, [&](const v1::Rollout& rollout) {
    return deploy::AbortRollout(rollout, reason);
  });
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Update(const v1::Rollout& spec) {
  if (spec.id().empty()) return InvalidArgumentForField("rollout.id", "rollout.id: must name a rollout");
  // A bad spec is refused before the store is asked, like CreateRollout's.
  if (absl::Status valid = deploy::RequireSpecOnly(spec); !valid.ok()) return valid;
  const std::shared_ptr<const policy::Policy> policy = deps_.policy();
  if (absl::Status valid = deploy::ValidateRollout(spec, *policy); !valid.ok()) return valid;
  absl::StatusOr<v1::Rollout> updated = Transact(spec.id(), [&](const v1::Rollout& rollout) {
    return deploy::UpdateRolloutSpec(rollout, spec, *policy);
  });
  if (updated.status().code() == absl::StatusCode::kNotFound) {
    return WithViolatedField(
        absl::NotFoundError(absl::StrCat("rollout.id: '", spec.id(), "' names no rollout")),
        "rollout.id");
  }
  if (updated.ok()) spdlog::info("rollout {}: spec updated", spec.id());
  return updated;
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Delete(const std::string& id) {
  if (absl::Status valid = RequireId(id); !valid.ok()) return valid;
  absl::Status last = absl::OkStatus();
  for (int attempt = 0; attempt < kMaxRevisionRetries; ++attempt) {
    absl::StatusOr<store::StoredRollout> stored = deps_.store->GetRollout(id);
    if (stored.status().code() == absl::StatusCode::kNotFound) {
      return WithViolatedField(absl::NotFoundError(absl::StrCat("id: '", id, "' names no rollout")),
                               "id");
    }
    if (!stored.ok()) return stored.status();
    const v1::Rollout& rollout = stored->rollout;
    // A running or paused rollout is still judging or holding devices:
    // deleting it would drop its members without an abort's record.
    if (rollout.state() != v1::ROLLOUT_STATE_COMPLETED &&
        rollout.state() != v1::ROLLOUT_STATE_ABORTED &&
        rollout.state() != v1::ROLLOUT_STATE_ROLLED_BACK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot delete rollout '", id, "': it is ", v1::RolloutState_Name(rollout.state()),
          "; only a COMPLETED, ABORTED or ROLLED_BACK rollout can be deleted (abort it first)"));
    }
    absl::Status deleted = deps_.store->DeleteRollout(id, stored->revision);
    if (deleted.ok()) {
      deps_.cache->Remove(rollout);
      if (deps_.metrics != nullptr) deps_.metrics->RemoveRollout(id);
      spdlog::info("rollout {}: deleted ({})", id, v1::RolloutState_Name(rollout.state()));
      return rollout;
    }
    if (deleted.code() != absl::StatusCode::kAborted) return deleted;
    last = deleted;
  }
  return absl::AbortedError(absl::StrCat("rollout '", id, "' kept changing under ",
                                         kMaxRevisionRetries, " attempts: ", last.message()));
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Advance(const std::string& id,
                                                  const std::string& reason) {
  // Fresh counts, so a gate that is breached right now blocks the advance
  // even if the last reconcile pass has not seen the reports yet.
  absl::StatusOr<FleetSnapshot> fleet = LoadFleetSnapshot(*deps_.store);
  if (!fleet.ok()) return fleet.status();
  return Transact(id, [&](const v1::Rollout& rollout) {
    const absl::Time now = deps_.now();
    const deploy::FleetSplit split = deploy::SplitFleet(rollout, FleetFor(*fleet, rollout.id()));
    return deploy::AdvanceRollout(rollout, deploy::CountMembers(rollout, split.members, now),
                                  deploy::CountControl(split.control),
                                  reason, now);
  });
}

}  // namespace weightpath::server
