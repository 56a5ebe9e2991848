#include "deploy/cohort_outcomes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "deploy/rollout_bucket.h"
#include "deploy/rollout_shaping.h"

namespace weightpath::deploy {
namespace {

// Adds one device's lifecycle outcome and task counts; returns false when
// the outcome is not conclusive (no success, no failure yet).
bool CountConclusive(const DeviceOutcomes& outcomes, v1::CohortOutcomes* counts) {
  counts->set_tasks_completed(counts->tasks_completed() + outcomes.tasks_completed);
  counts->set_tasks_undone(counts->tasks_undone() + outcomes.tasks_undone);
  counts->set_tasks_failed(counts->tasks_failed() + outcomes.tasks_failed);
  switch (outcomes.lifecycle) {
    case v1::OUTCOME_ENGINE_STARTED:
      counts->set_engine_started(counts->engine_started() + 1);
      return true;
    case v1::OUTCOME_BOOT_FAILED:
      counts->set_boot_failed(counts->boot_failed() + 1);
      return true;
    case v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED:
      counts->set_artifact_failed(counts->artifact_failed() + 1);
      return true;
    case v1::OUTCOME_ENGINE_START_FAILED:
    case v1::OUTCOME_ROLLED_BACK:
      // Going back to the previous decision means the new build did not run.
      counts->set_engine_failed(counts->engine_failed() + 1);
      return true;
    case v1::OUTCOME_CACHE_FULL:
      // The device's disk, not the build: it never ran, so it says nothing
      // of the build's health, but the device did answer (not silent).
      counts->set_cache_full(counts->cache_full() + 1);
      return true;
    default:
      return false;
  }
}

bool HasReported(const DeviceOutcomes& outcomes) {
  return outcomes.lifecycle != v1::OUTCOME_UNSPECIFIED || outcomes.tasks_completed > 0 ||
         outcomes.tasks_undone > 0 || outcomes.tasks_failed > 0;
}

double Ratio(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

absl::Status FoldOutcomeReport(const v1::ReportOutcomeRequest& report, absl::Time observed_at,
                               DeviceOutcomes* into) {
  if (report.device_id() != into->device_id) {
    return absl::InvalidArgumentError(absl::StrCat("report.device_id: '", report.device_id(),
                                                   "' is not the record's '", into->device_id,
                                                   "'"));
  }
  if (report.rollout_id() != into->rollout_id) {
    return absl::InvalidArgumentError(absl::StrCat("report.rollout_id: '", report.rollout_id(),
                                                   "' is not the record's '", into->rollout_id,
                                                   "'"));
  }
  if (report.outcome() == v1::OUTCOME_UNSPECIFIED) {
    return absl::InvalidArgumentError("report.outcome: must not be OUTCOME_UNSPECIFIED");
  }
  if (report.outcome() == v1::OUTCOME_TASKS) {
    into->tasks_completed += report.tasks_completed();
    into->tasks_undone += report.tasks_undone();
    into->tasks_failed += report.tasks_failed();
    return absl::OkStatus();
  }
  if (observed_at >= into->lifecycle_at) {
    into->lifecycle = report.outcome();
    into->lifecycle_at = observed_at;
  }
  return absl::OkStatus();
}

void AssignOutcomeRecords(const std::vector<DeviceOutcomes>& records,
                          absl::string_view rollout_id, FleetDevice* device) {
  device->on_rollout_build = DeviceOutcomes{device->device_id, std::string(rollout_id)};
  device->on_other_build = DeviceOutcomes{device->device_id, ""};
  bool have_other = false;
  for (const DeviceOutcomes& record : records) {
    if (record.rollout_id == rollout_id) {
      device->on_rollout_build = record;
    } else if (!have_other || record.lifecycle_at > device->on_other_build.lifecycle_at) {
      device->on_other_build = record;
      have_other = true;
    }
  }
}

FleetSplit SplitFleet(const v1::Rollout& rollout, const std::vector<FleetDevice>& fleet) {
  FleetSplit split;
  uint32_t percent = MembershipPercent(rollout);
  for (const FleetDevice& device : fleet) {
    if (!Matches(rollout.selector(), device.labels, device.hardware_class)) continue;
    if (BucketWithinPercent(RolloutBucket(rollout.id(), device.device_id), percent)) {
      split.members.push_back({device.device_id, device.on_rollout_build, device.hardware_class,
                               device.first_shaped_resolve});
    } else {
      split.control.push_back({device.device_id, device.on_other_build, device.hardware_class});
    }
  }
  return split;
}

uint32_t AdmittingStage(const v1::Rollout& rollout, absl::string_view device_id) {
  return std::min<uint32_t>({StageThatAdmits(rollout, RolloutBucket(rollout.id(), device_id)),
                             rollout.current_stage(),
                             static_cast<uint32_t>(std::max(1, rollout.stage_entered_at_size())) - 1,
                             static_cast<uint32_t>(std::max(1, rollout.stages_size())) - 1});
}

FleetSplit CurrentStageCohorts(const v1::Rollout& rollout, const FleetSplit& split) {
  FleetSplit stage;
  for (const CohortDevice& member : split.members) {
    if (AdmittingStage(rollout, member.device_id) == rollout.current_stage()) {
      stage.members.push_back(member);
    }
  }
  const absl::Time opened =
      rollout.stage_entered_at_size() > static_cast<int>(rollout.current_stage())
          ? FromProtoTime(rollout.stage_entered_at(rollout.current_stage()))
          : absl::InfinitePast();
  stage.control = split.control;
  for (CohortDevice& device : stage.control) {
    if (device.outcomes.lifecycle_at < opened) {
      device.outcomes.lifecycle = v1::OUTCOME_UNSPECIFIED;
      device.outcomes.lifecycle_at = absl::InfinitePast();
    }
  }
  return stage;
}

absl::Duration ReachTimeout(absl::Duration steady_interval, absl::Duration stage_interval) {
  return steady_interval * 1.2 + stage_interval;
}

absl::string_view MemberStandingName(MemberStanding standing) {
  switch (standing) {
    case MemberStanding::kSucceeded:
      return "engine_started";
    case MemberStanding::kFailed:
      return "failed";
    case MemberStanding::kRolledBack:
      return "rolled_back";
    case MemberStanding::kCacheFull:
      return "cache_full";
    case MemberStanding::kSilent:
      return "silent";
    case MemberStanding::kUnreached:
      return "unreached";
    case MemberStanding::kPending:
      return "pending";
  }
  return "unknown";
}

MemberStanding StandingOf(const v1::Rollout& rollout, const CohortDevice& member, absl::Time now,
                          absl::Duration reach_timeout) {
  switch (member.outcomes.lifecycle) {
    case v1::OUTCOME_ENGINE_STARTED:
      return MemberStanding::kSucceeded;
    case v1::OUTCOME_ROLLED_BACK:
      return MemberStanding::kRolledBack;
    case v1::OUTCOME_CACHE_FULL:
      return MemberStanding::kCacheFull;
    default:
      if (IsBuildFailure(member.outcomes.lifecycle)) return MemberStanding::kFailed;
  }
  if (rollout.stage_entered_at().empty() || rollout.stages().empty()) {
    return MemberStanding::kPending;  // not started
  }
  const uint32_t stage = AdmittingStage(rollout, member.device_id);
  const absl::Time opened = FromProtoTime(rollout.stage_entered_at(stage));
  if (member.first_shaped_resolve == absl::InfiniteFuture()) {
    // Nothing has told the device yet: its silence says nothing of the build.
    return now >= opened + reach_timeout ? MemberStanding::kUnreached : MemberStanding::kPending;
  }
  const absl::Time deadline = std::max(opened, member.first_shaped_resolve) +
                              absl::Seconds(rollout.stages(stage).report_timeout_seconds());
  return now >= deadline ? MemberStanding::kSilent : MemberStanding::kPending;
}

v1::CohortOutcomes CountMembers(const v1::Rollout& rollout, const std::vector<CohortDevice>& members,
                                absl::Time now, absl::Duration reach_timeout) {
  v1::CohortOutcomes counts;
  counts.set_devices(members.size());
  for (const CohortDevice& member : members) {
    if (HasReported(member.outcomes)) counts.set_reporting(counts.reporting() + 1);
    if (CountConclusive(member.outcomes, &counts)) continue;
    switch (StandingOf(rollout, member, now, reach_timeout)) {
      case MemberStanding::kSilent:
        counts.set_silent(counts.silent() + 1);
        break;
      case MemberStanding::kUnreached:
        counts.set_unreached(counts.unreached() + 1);
        break;
      default:
        break;
    }
  }
  return counts;
}

v1::CohortOutcomes CountControl(const std::vector<CohortDevice>& control) {
  v1::CohortOutcomes counts;
  counts.set_devices(control.size());
  for (const CohortDevice& device : control) {
    if (HasReported(device.outcomes)) counts.set_reporting(counts.reporting() + 1);
    CountConclusive(device.outcomes, &counts);
  }
  return counts;
}

uint64_t Concluded(const v1::CohortOutcomes& outcomes) {
  return outcomes.engine_started() + outcomes.boot_failed() + outcomes.artifact_failed() +
         outcomes.engine_failed() + outcomes.silent();
}

uint64_t Settled(const v1::CohortOutcomes& outcomes) {
  return Concluded(outcomes) + outcomes.cache_full() + outcomes.unreached();
}

bool IsBuildFailure(v1::Outcome outcome) {
  return outcome == v1::OUTCOME_BOOT_FAILED || outcome == v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED ||
         outcome == v1::OUTCOME_ENGINE_START_FAILED || outcome == v1::OUTCOME_ROLLED_BACK;
}

double BootFailureRate(const v1::CohortOutcomes& outcomes) {
  return Ratio(outcomes.boot_failed(), Concluded(outcomes));
}

double EngineFailureRate(const v1::CohortOutcomes& outcomes) {
  return Ratio(outcomes.artifact_failed() + outcomes.engine_failed() + outcomes.silent(),
               Concluded(outcomes));
}

double TaskFailureRate(const v1::CohortOutcomes& outcomes) {
  uint64_t failed = outcomes.tasks_undone() + outcomes.tasks_failed();
  return Ratio(failed, outcomes.tasks_completed() + failed);
}

}  // namespace weightpath::deploy
