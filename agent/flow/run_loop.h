// What `weightpath-agent run` does after boot: resolve again every so often
// (the server's suggested interval, with jitter so a fleet does not poll in
// lockstep), and when the decision changes bring the new build in:
//   fetch and verify the artifact -> swap the hand-over files atomically ->
//   apply_command -> engine_check_command (optional) ->
//   report OUTCOME_ENGINE_STARTED (with the decision's rollout attribution).
// If applying or the check fails, the previous decision goes back (files
// swapped back, apply_command run again) and the agent reports
// OUTCOME_ENGINE_START_FAILED then OUTCOME_ROLLED_BACK, both naming the
// rollout whose build failed, so that rollout's gates see it. A decision
// that failed is tried again after the server's failed_build_retry_seconds
// (doubling with each further failure, up to 16x), or when the answer
// changes; a server that sets none: only when the answer changes.
// Every lifecycle report carries what runs once its event is over
// (ReportOutcomeRequest.running), so the registry sees drift.
// With a trust block, each pass that reaches the server updates the signed
// metadata, and a new artifact the trust check refuses is reported once as
// OUTCOME_ARTIFACT_VERIFICATION_FAILED and checked again on later passes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config/agent_config.h"
#include "agent/flow/boot_flow.h"
#include "common/clock.h"
#include "agent/decision/decision_record.h"
#include "agent/base/random_source.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// The outside world of the run loop, injected so tests drive time, jitter,
// the server and the commands: boot's (clock, randomness, probe, resolve,
// reporting outcomes, the trust client), plus running the configured
// commands.
struct RunDependencies : BootDependencies {
  // Runs a configured shell command; `what` is its config key.
  std::function<absl::Status(const std::string& command, const std::string& what)> run_command;
};

// The wait before the next resolve: `interval` drawn uniformly from
// [0.8, 1.2] of itself, so devices told the same interval spread out while
// the average stays what the server asked for.
absl::Duration JitteredInterval(absl::Duration interval, RandomSource& random);

// The server's resolve_interval_seconds held within the config's
// [min_resolve_interval, max_resolve_interval].
absl::Duration ServerInterval(uint32_t suggested_seconds, const AgentConfig& config);

// The parts of a decision that change what the engine runs. A new stage or
// rollout attribution with the same build is not a change to apply.
std::string BuildKey(const v1::ResolveWeightPathResponse& response);

enum class PassResult {
  kUnchanged,        // same build as running (maybe a new attribution)
  kApplied,          // a new build runs and the engine check passed
  kRolledBack,       // the new build failed; the previous one runs again
  kSkippedRejected,  // the server still offers a build that failed here
  kResolveFailed,    // no answer from the server; nothing changed
  kFetchFailed,      // the new artifact could not be fetched or verified,
                     // or the trust check refused it
  kRefusedDecision,  // the answer cannot be handed to the engine safely
                     // (see engine_input.h); nothing changed
};

class RunLoop {
 public:
  // `current` is the decision the engine runs now (from decision_file), if
  // any; it must have passed ValidateForEngine (ReadDecisionFile checks).
  RunLoop(const AgentConfig& config, RunDependencies& dependencies,
          std::optional<DecisionRecord> current);

  // One resolve and whatever it calls for. Sets next_wait().
  PassResult RunOnce();
  // RunOnce, sleep next_wait() on the injected clock, until `keep_going` says no.
  void Run(const std::function<bool()>& keep_going);

  absl::Duration next_wait() const { return next_wait_; }
  const std::optional<DecisionRecord>& current() const { return current_; }
  // Reports not yet accepted by the server; retried on every pass, and kept
  // in state_dir (pending_reports.h) until the server takes them, so a loop
  // that is stopped or dies loses none of them.
  const std::vector<v1::ReportOutcomeRequest>& unsent_reports() const { return unsent_; }
  // Adds reports made before the loop (a boot's, already in state_dir) to
  // those sent on the next pass.
  void QueueReports(std::vector<v1::ReportOutcomeRequest> reports);

 private:
  // `staged` is the decision whose staging the report follows, so the
  // bytes it downloaded are reported with it (once).
  void Report(v1::Outcome outcome, const v1::ResolveWeightPathResponse& about,
              const std::string& detail, const DecisionRecord* staged = nullptr);
  void FlushReports();
  PassResult Apply(const v1::ResolveWeightPathResponse& response,
                   const v1::HardwareProfile& profile);
  absl::Status StartEngine(const DecisionRecord& record);
  BuildCache& builds();
  // A build that failed here (its bytes refused, or the engine did not start
  // on it) is not tried again while the server keeps offering it, until
  // RetryWait has passed since its last failure.
  void Reject(const v1::ResolveWeightPathResponse& response);
  void ForgetRejected();
  // failed_build_retry_seconds, held to [min_resolve_interval, 24h], doubled
  // for each failure after the first, up to 16x; nullopt when the server sets
  // none (not until the answer changes).
  std::optional<absl::Duration> RetryWait(const v1::ResolveWeightPathResponse& response) const;
  static constexpr int kMaxRetryDoublings = 4;
  // The longest failed_build_retry_seconds taken (the server's own bound).
  static constexpr absl::Duration kMaxRetryInterval = absl::Hours(24);

  const AgentConfig& config_;
  RunDependencies& dependencies_;
  std::optional<DecisionRecord> current_;
  std::string rejected_build_;
  int rejected_failures_ = 0;  // consecutive failures of rejected_build_
  // Going back to current_ after a failed build failed as well: its files
  // are in place but the engine's apply or check did not pass, so reports
  // say nothing runs until a build starts.
  bool engine_down_ = false;
  MonotonicTime rejected_at_;
  // The last out-of-bounds resolve interval the server suggested and the log
  // told of.
  std::optional<uint32_t> warned_interval_;
  std::string trust_reported_build_;  // the last build the trust check refused
  // The last build that did not fit the cache: reported once, tried again
  // on every pass (eviction or a bigger disk may make room).
  std::string cache_full_build_;
  // The last good decision in state_dir: kept in the cache with current_.
  std::optional<DecisionRecord> last_good_;
  std::unique_ptr<BuildCache> owned_builds_;  // when dependencies_.builds is null
  absl::Duration next_wait_;
  std::vector<v1::ReportOutcomeRequest> unsent_;
  // state_dir's pending reports file may hold reports: it is rewritten after
  // every send until it is empty.
  bool unsent_saved_ = false;
};

}  // namespace weightpath::agent
