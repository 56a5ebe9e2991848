// What members and the control group of a rollout have reported, counted
// the way the health gates read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "deploy/label_selector.h"
#include "weightpath/v1/rollout.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::deploy {

// The reports of one device about one build, folded: the latest lifecycle
// outcome (everything but OUTCOME_TASKS) and the task counts summed. Keep
// one per (device_id, rollout_id); rollout_id is the report's rollout_id,
// empty for a build no rollout shaped.
struct DeviceOutcomes {
  std::string device_id;
  std::string rollout_id;
  v1::Outcome lifecycle = v1::OUTCOME_UNSPECIFIED;
  absl::Time lifecycle_at = absl::InfinitePast();
  uint64_t tasks_completed = 0;
  uint64_t tasks_undone = 0;
  uint64_t tasks_failed = 0;
};

// Adds one ReportOutcome to `into`. A later lifecycle outcome replaces an
// earlier one (by `observed_at`, so reports arriving out of order do not
// roll a device back in time); task counts add up. Deduplication by
// idempotency key is the caller's job. INVALID_ARGUMENT naming the field
// when the report's device_id or rollout_id is not the record's, or its
// outcome is OUTCOME_UNSPECIFIED.
absl::Status FoldOutcomeReport(const v1::ReportOutcomeRequest& report, absl::Time observed_at,
                               DeviceOutcomes* into);

// One device of the fleet as the rollout evaluation needs it.
struct FleetDevice {
  std::string device_id;
  Labels labels;
  policy::HardwareClass hardware_class = policy::HardwareClass::kX86Cpu;
  DeviceOutcomes on_rollout_build;  // reports whose rollout_id is this rollout's
  DeviceOutcomes on_other_build;    // its latest reports about any other build
  // See CohortDevice::first_shaped_resolve.
  absl::Time first_shaped_resolve = absl::InfinitePast();
};

// Fills device->on_rollout_build with the record whose rollout_id is
// `rollout_id` and device->on_other_build with the other record whose
// lifecycle outcome is the latest; an absent record leaves an empty one for
// the device. `records` are one device's, as kept for FoldOutcomeReport.
void AssignOutcomeRecords(const std::vector<DeviceOutcomes>& records,
                          absl::string_view rollout_id, FleetDevice* device);

struct CohortDevice {
  std::string device_id;
  DeviceOutcomes outcomes;
  // Sequential gates compare members with control devices of their class.
  policy::HardwareClass hardware_class = policy::HardwareClass::kX86Cpu;
  // The first resolve this rollout shaped for the device: a device learns
  // of a rollout only when it resolves, so a member's report timeout runs
  // from then (and never from before its stage opened). InfinitePast for a
  // caller that does not track resolves: the clock runs from the stage's
  // opening. InfiniteFuture: no shaped resolve has reached the device yet.
  absl::Time first_shaped_resolve = absl::InfinitePast();
};

struct FleetSplit {
  std::vector<CohortDevice> members;  // selector matches, bucket within the percent
  std::vector<CohortDevice> control;  // selector matches, not (yet) a member
};

// Members carry their reports about the rollout's build; control devices
// carry theirs about the build they run instead. Devices outside the
// selector appear in neither.
FleetSplit SplitFleet(const v1::Rollout& rollout, const std::vector<FleetDevice>& fleet);

// The stage that admitted a member: the first whose percent covers its
// bucket, capped at the current stage (a member no entered stage covers can
// only come from a caller's own split; it is taken to have joined with the
// current stage).
uint32_t AdmittingStage(const v1::Rollout& rollout, absl::string_view device_id);

// What the current stage is judged on: the members it admitted (earlier
// stages' members were judged by their own stages), and the control
// devices with only the lifecycle outcomes they reported since the stage
// opened, so both sides cover the same window. Task counts carry no time
// and are kept whole.
FleetSplit CurrentStageCohorts(const v1::Rollout& rollout, const FleetSplit& split);

// How long after its stage opened a member that no shaped resolve has
// reached counts as `unreached` rather than pending: a device told to
// resolve every `steady` does so within steady x 1.2 (the agent's largest
// jitter), plus one short interval for a stage opened just after it asked.
absl::Duration ReachTimeout(absl::Duration steady_interval, absl::Duration stage_interval);
inline constexpr absl::Duration kDefaultReachTimeout = absl::Minutes(77);  // 1 h x 1.2 + 5 min

// Where one member stands, as CountMembers counts it.
enum class MemberStanding {
  kSucceeded,   // OUTCOME_ENGINE_STARTED
  kFailed,      // boot, artifact or engine start failed
  kRolledBack,  // OUTCOME_ROLLED_BACK (a failure too)
  kCacheFull,   // the build did not fit: counted apart
  kSilent,      // told, and its report timeout ran out
  kUnreached,   // no shaped resolve reached it within the reach timeout
  kPending,     // none of these yet
};

absl::string_view MemberStandingName(MemberStanding standing);  // "silent", "rolled_back", ...

MemberStanding StandingOf(const v1::Rollout& rollout, const CohortDevice& member, absl::Time now,
                          absl::Duration reach_timeout = kDefaultReachTimeout);

// Members, counted: engine_started is the only success; boot_failed,
// artifact_failed and engine_failed (ENGINE_START_FAILED and ROLLED_BACK)
// are failures; a member with none of these once its report timeout has run
// out (from the start of the stage that admitted it) is `silent`, whether it
// said nothing or only BOOT_OK. CACHE_FULL (the build does not fit the
// device's disk) is counted apart as cache_full: neither success, failure
// nor silence, so no gate reads it. A member no shaped resolve has reached
// `reach_timeout` after its stage opened is `unreached`: it could not know,
// so it is not silent, and it is not waited for. `reporting` counts members
// that sent any report about the rollout's build.
v1::CohortOutcomes CountMembers(const v1::Rollout& rollout, const std::vector<CohortDevice>& members,
                                absl::Time now, absl::Duration reach_timeout = kDefaultReachTimeout);

// Control devices, counted the same way except that none is ever silent:
// nothing asked them to change, so silence says nothing about a build.
v1::CohortOutcomes CountControl(const std::vector<CohortDevice>& control);

// Devices whose fate is known: successes, failures and silent ones.
uint64_t Concluded(const v1::CohortOutcomes& outcomes);

// Members nothing more is waited for: concluded, cache_full or unreached.
uint64_t Settled(const v1::CohortOutcomes& outcomes);

// Failures of the build: boot, artifact, engine start, rolled back.
bool IsBuildFailure(v1::Outcome outcome);

// Failure rates in [0, 1]; 0 when nothing is concluded (or no tasks ran).
double BootFailureRate(const v1::CohortOutcomes& outcomes);
double EngineFailureRate(const v1::CohortOutcomes& outcomes);  // artifact + engine + silent
double TaskFailureRate(const v1::CohortOutcomes& outcomes);    // (undone + failed) / tasks

}  // namespace weightpath::deploy
