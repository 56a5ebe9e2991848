#include "store/device_drift.h"

#include <algorithm>

namespace weightpath::store {

std::optional<DriftVerdict> DriftOf(std::string_view assigned_key, absl::Time assigned_since,
                                    const std::optional<RunningRecord>& running) {
  if (assigned_key.empty() || !running.has_value() || running->build_key == assigned_key) {
    return std::nullopt;
  }
  DriftVerdict verdict{"pending", std::max(assigned_since, running->since)};
  // A report older than the assignment says nothing about it: the device
  // has not acted on it yet (or the registry has not heard).
  if (running->received_at < assigned_since) return verdict;
  if (running->build_key.empty()) {
    verdict.reason = "not_running";
  } else if (running->outcome == v1::OUTCOME_ROLLED_BACK ||
             running->outcome == v1::OUTCOME_ENGINE_START_FAILED) {
    verdict.reason = "rolled_back";
  } else if (running->outcome == v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED) {
    verdict.reason = "build_refused";
  } else if (running->outcome == v1::OUTCOME_CACHE_FULL) {
    verdict.reason = "cache_full";
  } else if (running->source == v1::BOOT_SOURCE_LAST_GOOD ||
             running->source == v1::BOOT_SOURCE_OFFLINE) {
    verdict.reason = "fallback";
  }
  // Else the device reported another build as a success (started, booted)
  // after the assignment: the registry's record of the assignment has not
  // caught up, or the device is about to resolve again.
  return verdict;
}

}  // namespace weightpath::store
