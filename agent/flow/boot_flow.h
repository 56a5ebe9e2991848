// What the agent does at boot: probe, resolve within the budget, fetch and
// verify the artifact, hand the decision to the engine; and when the server
// cannot be used, fall back so the device boots anyway.
//
// Fallback order:
//   1. the server's decision, once its artifact is in the cache and verified;
//   2. the last good server decision in state_dir, if its artifact still
//      verifies in the cache (no network needed);
//   3. the embedded default policy evaluated on the device ("offline"). Only
//      the catalog knows where a build lives, so an offline decision carries
//      an artifact only when the last good decision named the same path and
//      model: that catalog entry is then known, and the artifact is taken
//      from the cache or downloaded again within the budget. Otherwise the
//      decision names the path with no artifact, and the engine's unit runs
//      its own configured model.
// The decision file and env file are each replaced atomically, or not at all.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config/agent_config.h"
#include "agent/fetch/artifact_fetcher.h"
#include "agent/fetch/build_cache.h"
#include "common/clock.h"
#include "agent/decision/decision_record.h"
#include "agent/base/random_source.h"
#include "common/command_line.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// The part of the budget resolve retries leave for the fallbacks, so an
// unreachable server still leaves time to fetch a known artifact.
inline constexpr double kFallbackShareOfBudget = 0.25;

// Exit codes of `weightpath-agent boot`. The fallback codes are nonzero so a
// supervisor can tell them apart, and listed in the unit's SuccessExitStatus
// so the engine still starts.
inline constexpr int kExitServerDecision = 0;
inline constexpr int kExitNothingUsable = 1;  // also: unreadable or invalid config
inline constexpr int kExitUsage = kExitUsageError;  // common/command_line.h
inline constexpr int kExitLastGoodDecision = 3;
inline constexpr int kExitOfflineDecision = 4;
// A fallback decision was handed over, but this install cannot download
// (libcurl.so.4 cannot be loaded): a fault of the device's packages that no
// retry fixes, so unlike 3 and 4 it fails the unit, where monitoring sees it.
inline constexpr int kExitCannotDownload = 5;

int ExitCodeFor(DecisionSource source);

class TrustClient;  // trust_client.h

// The outside world of the boot flow, injected so tests can drive time,
// randomness, the probe and the server.
struct BootDependencies {
  Clock* clock = nullptr;
  RandomSource* random = nullptr;
  std::function<absl::StatusOr<v1::HardwareProfile>()> probe;
  // One ResolveWeightPath call, which may take `timeout` from when it starts.
  std::function<absl::StatusOr<v1::ResolveWeightPathResponse>(
      const v1::ResolveWeightPathRequest& request, absl::Duration timeout)>
      resolve;
  std::string agent_version;
  // With a `trust` block (trust_client.h): the metadata is updated once the
  // server has answered, and the answer's artifact must be one the verified
  // targets list for this device before anything is downloaded; a refusal
  // makes the decision unusable. Null: no such check.
  TrustClient* trust = nullptr;
  // One ReportOutcome call, which may take `timeout` from when it starts.
  // Boot reports a decision the trust check refused
  // (OUTCOME_ARTIFACT_VERIFICATION_FAILED); unset: nothing is reported.
  std::function<absl::Status(const v1::ReportOutcomeRequest& request, absl::Duration timeout)>
      report;
  // The build cache (fetch/build_cache.h) builds are staged into. Null: the
  // flow makes the real one on config.cache_dir with the injected clock.
  BuildCache* builds = nullptr;
};

struct BootOutcome {
  DecisionRecord record;
  // Why the server's decision was not used (empty when it was).
  std::string fallback_reason;
  // The trust check refused the server's artifact (the reason is in
  // fallback_reason).
  bool trust_refused = false;
  // When the boot's budget ends (monotonic): what the boot still sends
  // after the hand-over (its outcome reports) must end by then too, or the
  // engine, which waits for boot, waits past the budget.
  MonotonicTime budget_end;
  // Reports the flow made but could not send (a trust refusal the server
  // did not take in time), oldest first: kept with the pending reports.
  std::vector<v1::ReportOutcomeRequest> unsent_reports;
};

// Runs the whole flow and writes the hand-over files. An error means no
// decision could be made at all (FAILED_PRECONDITION naming what was
// missing) or the hand-over could not be written.
absl::StatusOr<BootOutcome> RunBootFlow(const AgentConfig& config, BootDependencies& dependencies);

}  // namespace weightpath::agent
