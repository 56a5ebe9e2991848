#include "server/rollout/rollout_admin.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/control_characters.h"
#include "common/field_violation.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "deploy/cohort_outcomes.h"
#include "deploy/operator_actions.h"
#include "deploy/rollout_bucket.h"
#include "deploy/rollout_shaping.h"
#include "deploy/rollout_validation.h"
#include "deploy/stage_plan.h"
#include "policy/hardware_class.h"
#include "server/rollout/rollout_fleet.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

absl::Status RequireId(const std::string& id) {
  if (id.empty()) return InvalidArgumentForField("id", "id: must name a rollout");
  return absl::OkStatus();
}

constexpr uint32_t kDefaultDevicePage = 100;
constexpr uint32_t kMaxDevicePage = 1000;
// A page token is the last device id of the previous page; device ids are
// at most 256 bytes (store/measurement_validation.h).
constexpr size_t kMaxPageTokenBytes = 256;
constexpr deploy::MemberStanding kStandings[] = {
    deploy::MemberStanding::kSucceeded, deploy::MemberStanding::kFailed,
    deploy::MemberStanding::kRolledBack, deploy::MemberStanding::kCacheFull,
    deploy::MemberStanding::kSilent,    deploy::MemberStanding::kUnreached,
    deploy::MemberStanding::kPending};

absl::StatusOr<std::vector<deploy::MemberStanding>> ParseStandings(
    const google::protobuf::RepeatedPtrField<std::string>& names) {
  std::vector<deploy::MemberStanding> wanted;
  for (int i = 0; i < names.size(); ++i) {
    bool known = false;
    for (deploy::MemberStanding standing : kStandings) {
      if (deploy::MemberStandingName(standing) == names[i]) {
        wanted.push_back(standing);
        known = true;
      }
    }
    if (!known) {
      const std::string field = absl::StrCat("standings[", i, "]");
      std::vector<std::string> all;
      for (deploy::MemberStanding standing : kStandings) {
        all.emplace_back(deploy::MemberStandingName(standing));
      }
      std::string shown;
      AppendControlEscaped(absl::string_view(names[i]).substr(0, 64), &shown);
      return InvalidArgumentForField(field, absl::StrCat(field, ": '", shown, "' is not one of ",
                                                         absl::StrJoin(all, ", ")));
    }
  }
  return wanted;
}

}  // namespace

absl::Status RolloutAdmin::AttachPlans(v1::Rollout* rollout) {
  ASSIGN_OR_RETURN(const FleetSnapshot fleet, LoadFleetSnapshot(*deps_.store));
  v1::Rollout at_start = *rollout;
  at_start.set_current_stage(0);
  const deploy::FleetSplit split =
      deploy::SplitFleet(at_start, FleetFor(fleet, rollout->id()));
  // The control's latest outcomes on the builds they run now, whenever
  // reported: the rate the stages' control groups start from.
  const v1::CohortOutcomes control = deploy::CountControl(split.control);
  // Which stage admits each selected device, by its bucket.
  std::vector<uint64_t> admitted(rollout->stages_size(), 0);
  for (const std::vector<deploy::CohortDevice>* side : {&split.members, &split.control}) {
    for (const deploy::CohortDevice& device : *side) {
      const uint32_t stage =
          deploy::StageThatAdmits(*rollout, deploy::RolloutBucket(rollout->id(), device.device_id));
      if (stage < admitted.size()) ++admitted[stage];
    }
  }
  rollout->clear_stage_plans();
  for (v1::StagePlan& plan : deploy::PlanStages(*rollout, admitted,
                                                control.artifact_failed() + control.engine_failed(),
                                                deploy::Concluded(control))) {
    *rollout->add_stage_plans() = std::move(plan);
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Create(const v1::Rollout& spec) {
  absl::StatusOr<v1::Rollout> started = deploy::StartRollout(spec, *deps_.policy(), deps_.now());
  if (!started.ok()) return started.status();
  RETURN_IF_ERROR(AttachPlans(&*started));
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
  absl::StatusOr<v1::Rollout> updated =
      Transact(spec.id(), [&](const v1::Rollout& rollout) -> absl::StatusOr<v1::Rollout> {
    absl::StatusOr<v1::Rollout> next = deploy::UpdateRolloutSpec(rollout, spec, *policy);
    if (next.ok()) {
      if (absl::Status planned = AttachPlans(&*next); !planned.ok()) return planned;
    }
    return next;
  });
  if (updated.status().code() == absl::StatusCode::kNotFound) {
    return WithViolatedField(
        absl::NotFoundError(absl::StrCat("rollout.id: '", spec.id(), "' names no rollout")),
        "rollout.id");
  }
  if (updated.ok()) spdlog::info("rollout {}: spec updated", spec.id());
  return updated;
}

absl::StatusOr<v1::Rollout> RolloutAdmin::Delete(const std::string& id,
                                                 std::optional<v1::RolloutState> checked_state) {
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
    if (checked_state.has_value() && rollout.state() != *checked_state) {
      return absl::AbortedError(absl::StrCat(
          "rollout '", id, "' went from ", v1::RolloutState_Name(*checked_state), " to ",
          v1::RolloutState_Name(rollout.state()),
          " while its deletion was being checked; nothing was deleted, try again"));
    }
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
    // The current stage's own members and control window, as the
    // reconciler judges it.
    const deploy::FleetSplit split = deploy::CurrentStageCohorts(
        rollout, deploy::SplitFleet(rollout, FleetFor(*fleet, rollout.id())));
    return deploy::AdvanceRollout(rollout, deploy::CountMembers(rollout, split.members, now),
                                  deploy::CountControl(split.control),
                                  reason, now);
  });
}

absl::StatusOr<v1::ListRolloutDevicesResponse> RolloutAdmin::ListDevices(
    const v1::ListRolloutDevicesRequest& request) {
  if (absl::Status valid = RequireId(request.id()); !valid.ok()) return valid;
  ASSIGN_OR_RETURN(const std::vector<deploy::MemberStanding> wanted,
                   ParseStandings(request.standings()));
  if (request.page_size() > kMaxDevicePage) {
    return InvalidArgumentForField("page_size", absl::StrCat("page_size: ", request.page_size(),
                                                             " is over ", kMaxDevicePage));
  }
  if (request.page_token().size() > kMaxPageTokenBytes) {
    return InvalidArgumentForField(
        "page_token", absl::StrCat("page_token: ", request.page_token().size(),
                                   " bytes; a token is a device id, at most ", kMaxPageTokenBytes));
  }
  const uint32_t page_size = request.page_size() == 0 ? kDefaultDevicePage : request.page_size();
  ASSIGN_OR_RETURN(const store::StoredRollout stored, deps_.store->GetRollout(request.id()));
  const v1::Rollout& rollout = stored.rollout;
  ASSIGN_OR_RETURN(const FleetSnapshot fleet, LoadFleetSnapshot(*deps_.store));
  ASSIGN_OR_RETURN(const std::vector<store::DeviceOutcomes> reports,
                   deps_.store->LatestOutcomes(rollout.id()));
  std::map<std::string, const store::DeviceOutcomes*> report_of;
  for (const store::DeviceOutcomes& each : reports) report_of[each.device_id] = &each;
  std::map<std::string, const FleetSnapshot::Sighting*> sighting_of;
  for (size_t i = 0; i < fleet.devices.size(); ++i) {
    sighting_of[fleet.devices[i].device_id] = &fleet.sightings[i];
  }

  deploy::FleetSplit split = deploy::SplitFleet(rollout, FleetFor(fleet, rollout.id()));
  std::sort(split.members.begin(), split.members.end(),
            [](const deploy::CohortDevice& a, const deploy::CohortDevice& b) {
              return a.device_id < b.device_id;
            });
  const absl::Time now = deps_.now();
  v1::ListRolloutDevicesResponse response;
  uint64_t matched = 0;
  for (const deploy::CohortDevice& member : split.members) {
    const deploy::MemberStanding standing =
        deploy::StandingOf(rollout, member, now, deps_.reach_timeout);
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), standing) == wanted.end()) {
      continue;
    }
    ++matched;
    if (member.device_id <= request.page_token()) continue;
    if (static_cast<uint32_t>(response.devices_size()) == page_size) {
      response.set_next_page_token(response.devices().rbegin()->device_id());
      continue;  // still counted in `matched`
    }
    v1::RolloutDevice* row = response.add_devices();
    row->set_device_id(member.device_id);
    row->set_stage(deploy::AdmittingStage(rollout, member.device_id));
    row->set_hardware_class(std::string(policy::HardwareClassName(member.hardware_class)));
    if (member.first_shaped_resolve != absl::InfinitePast() &&
        member.first_shaped_resolve != absl::InfiniteFuture()) {
      *row->mutable_first_shaped_resolve() = ToProtoTime(member.first_shaped_resolve);
    }
    row->set_standing(std::string(deploy::MemberStandingName(standing)));
    row->set_outcome(member.outcomes.lifecycle);
    if (auto found = report_of.find(member.device_id); found != report_of.end()) {
      row->set_detail(found->second->latest_detail);
      if (found->second->last_report_at != absl::InfinitePast()) {
        *row->mutable_last_report() = ToProtoTime(found->second->last_report_at);
      }
    }
    if (auto found = sighting_of.find(member.device_id);
        found != sighting_of.end() && found->second->last_seen != absl::InfinitePast()) {
      *row->mutable_last_seen() = ToProtoTime(found->second->last_seen);
    }
  }
  response.set_matched(matched);
  return response;
}

}  // namespace weightpath::server
