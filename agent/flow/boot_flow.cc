#include "agent/flow/boot_flow.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/base/atomic_file.h"
#include "agent/decision/engine_input.h"
#include "agent/engine/handover.h"
#include "agent/decision/last_good_store.h"
#include "agent/base/log.h"
#include "agent/decision/offline_decision.h"
#include "agent/report/outcome_report.h"
#include "agent/decision/resolve_request.h"
#include "agent/net/retry_policy.h"
#include "agent/fetch/sha256_file.h"
#include "agent/flow/apply_decision.h"
#include "agent/signed/trust_client.h"
#include "agent/net/weightpath_client.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"

namespace weightpath::agent {
namespace {

absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

// Tells the server, which has just answered, why its decision is not run
// here (`outcome`: the trust check refused the build, its bytes are not the
// build, it does not fit the cache), within what is left of the budget; a
// report it does not take goes to `unsent`, to wait with the pending ones.
void ReportRefusal(const AgentConfig& config, BootDependencies& dependencies, v1::Outcome outcome,
                   const v1::ResolveWeightPathResponse& decision, absl::string_view detail,
                   MonotonicTime budget_end, std::vector<v1::ReportOutcomeRequest>* unsent) {
  if (!dependencies.report) return;
  const absl::Duration left =
      std::min(config.call_timeout, budget_end - dependencies.clock->MonotonicNow());
  v1::ReportOutcomeRequest report = OutcomeReport(config.device_id, outcome, decision,
                                                  std::string(detail), dependencies.clock->Now());
  const absl::Status sent = left > absl::ZeroDuration()
                                ? dependencies.report(report, left)
                                : absl::DeadlineExceededError("no time left in the budget");
  if (sent.ok()) {
    log::Info("boot: reported {}", v1::Outcome_Name(outcome));
  } else {
    log::Warn("boot: {} not reported: {}", v1::Outcome_Name(outcome), sent.ToString());
    if (IsRetryable(sent.code())) unsent->push_back(std::move(report));
  }
}

// With a trust block: the metadata updated, then the verdict on the
// answer's artifact for this device. `held` (the last good decision) names
// the artifact already installed. A refusal is reported.
absl::Status CheckSignedArtifact(const AgentConfig& config, BootDependencies& dependencies,
                                 const v1::HardwareProfile& profile,
                                 const v1::ResolveWeightPathResponse& decision,
                                 const v1::ResolveWeightPathResponse* held,
                                 MonotonicTime budget_end,
                                 std::vector<v1::ReportOutcomeRequest>* unsent) {
  TrustClient& trust = *dependencies.trust;
  // What a failed update means for this artifact is CheckArtifact's answer.
  trust.Update(budget_end - dependencies.clock->MonotonicNow()).IgnoreError();
  const v1::Artifact* installed = held != nullptr ? &held->artifact() : nullptr;
  const absl::Status verdict = CheckArtifactForDevice(trust, decision.artifact(), profile, installed);
  if (verdict.ok()) return verdict;
  log::Error("boot: trust: the server's artifact {} is refused: {}",
             ControlEscaped(decision.artifact().target_path().empty()
                                ? decision.artifact().uri()
                                : decision.artifact().target_path()),
             verdict.ToString());
  ReportRefusal(config, dependencies, v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED, decision,
                verdict.message(), budget_end, unsent);
  return verdict;
}

// Step 1: the server's decision with its artifact verified in the cache.
// Retries stop at `resolve_end`; the artifact may use the budget to its end.
// `held` (the last good server decision, or null) is offered to the server,
// which may answer that it still stands.
absl::StatusOr<DecisionRecord> DecideWithServer(const AgentConfig& config,
                                                BootDependencies& dependencies,
                                                const v1::HardwareProfile& profile,
                                                const v1::ResolveWeightPathResponse* held,
                                                MonotonicTime resolve_end, MonotonicTime budget_end,
                                                BuildCache& builds,
                                                const std::vector<const v1::Artifact*>& keep,
                                                bool* trust_refused,
                                                std::vector<v1::ReportOutcomeRequest>* unsent) {
  const v1::ResolveWeightPathRequest request =
      ResolveRequest(config, profile, dependencies.agent_version, held);
  const RetryOptions options = ServerRetryOptions(config);
  DecisionRecord record;
  RetryTrace trace;
  const absl::Status resolved = CallWithRetries(
      options, resolve_end, *dependencies.clock, *dependencies.random,
      [&](absl::Duration call_timeout) -> absl::Status {
        absl::StatusOr<v1::ResolveWeightPathResponse> response =
            dependencies.resolve(request, call_timeout);
        if (!response.ok()) {
          log::Info("boot: resolve attempt failed: {}", response.status().ToString());
          return response.status();
        }
        record.response = *std::move(response);
        return absl::OkStatus();
      },
      &trace);
  if (!resolved.ok()) return WithContext(resolved, "resolve");
  const bool unchanged = record.response.unchanged();
  absl::StatusOr<v1::ResolveWeightPathResponse> decision =
      DecisionFromAnswer(std::move(record.response), held);
  if (!decision.ok()) return WithContext(decision.status(), "server response");
  record.response = *std::move(decision);
  log::Info("boot: server {} path {} for model {} after {} attempt(s)",
               unchanged ? "kept" : "chose", record.response.weight_path().name(),
               record.response.model(), trace.attempts);

  // Before anything is downloaded or written: a decision the engine's unit
  // cannot be given safely is no decision at all.
  if (absl::Status usable = ValidateForEngine(record); !usable.ok()) {
    return WithContext(usable, "server response");
  }
  if (absl::Status valid = ValidateArtifact(record.response.artifact()); !valid.ok()) {
    return WithContext(valid, "server response");
  }
  if (dependencies.trust != nullptr) {
    // After the check, artifact.size_bytes is the signed length: the
    // download below stops there.
    if (absl::Status signed_artifact =
            CheckSignedArtifact(config, dependencies, profile, record.response, held, budget_end,
                                unsent);
        !signed_artifact.ok()) {
      *trust_refused = true;
      return WithContext(signed_artifact, "trust");
    }
  }
  absl::StatusOr<DecisionRecord> staged =
      StageDecision(builds, record.response, DecisionSource::kServer, keep,
                    budget_end - dependencies.clock->MonotonicNow(), "boot");
  if (!staged.ok()) {
    // A verdict on the build, or a disk it does not fit, is the server's to
    // know; a transfer that broke off is not (the next boot resumes it).
    if (const std::optional<v1::Outcome> outcome = OutcomeOfStagingFailure(staged.status())) {
      ReportRefusal(config, dependencies, *outcome, record.response, staged.status().message(),
                    budget_end, unsent);
    }
    return staged.status();
  }
  return staged;
}

// Writes the hand-over files, then tells the cache the build is in use and
// trims it, keeping `record`'s build and `also_keep` (the last good one).
absl::StatusOr<BootOutcome> HandOver(DecisionRecord record, std::string fallback_reason,
                                     const AgentConfig& config, MonotonicTime budget_end,
                                     BuildCache& builds, const DecisionRecord* also_keep,
                                     bool trust_refused = false,
                                     std::vector<v1::ReportOutcomeRequest> unsent = {}) {
  if (absl::Status written = WriteHandover(record, config.decision_file, config.env_file);
      !written.ok()) {
    return WithContext(written, "hand-over");
  }
  AfterHandOver(builds, record, ArtifactsOf({&record, also_keep}), "boot");
  return BootOutcome{std::move(record), std::move(fallback_reason), trust_refused, budget_end,
                     std::move(unsent)};
}

// The model a last good decision can stand in for: the one configured, or
// any when the config leaves the choice to the catalog.
bool SameModel(const AgentConfig& config, const DecisionRecord& last_good) {
  return config.model.empty() || config.model == last_good.response.model();
}

// Most boots repeat the previous decision; rewriting an identical file
// would cost two fsyncs on every boot and wear the flash of small devices.
void RememberLastGood(const DecisionRecord& record, const std::string& state_dir) {
  const absl::StatusOr<DecisionRecord> stored = LoadLastGood(state_dir);
  if (stored.ok() && stored->artifact_path == record.artifact_path &&
      google::protobuf::util::MessageDifferencer::Equals(stored->response, record.response)) {
    return;
  }
  if (absl::Status saved = SaveLastGood(record, state_dir); !saved.ok()) {
    // The engine has its decision; only a later fallback boot loses out.
    log::Warn("boot: could not record the last good decision: {}", saved.ToString());
  }
}

bool IsStampName(absl::string_view name) {
  absl::string_view digest = name;
  return absl::ConsumeSuffix(&digest, ".verified") && IsSha256Hex(std::string(digest));
}

// A crash between creating a temporary file and renaming it leaves the
// temporary file behind for good (nothing else ever names it), so each boot
// clears those of the files it is about to write.
void RemoveStaleTemporaries(const AgentConfig& config) {
  namespace fs = std::filesystem;
  auto directory_of = [](const std::string& path) {
    const fs::path parent = fs::path(path).parent_path();
    return parent.empty() ? std::string(".") : parent.string();
  };
  auto only = [](std::string name) {
    return [name = std::move(name)](absl::string_view target) { return target == name; };
  };
  struct Target {
    std::string directory;
    std::function<bool(absl::string_view)> is_target;
  };
  const Target targets[] = {
      {directory_of(config.decision_file), only(fs::path(config.decision_file).filename().string())},
      {directory_of(config.env_file), only(fs::path(config.env_file).filename().string())},
      {config.state_dir, only(fs::path(LastGoodPath(config.state_dir)).filename().string())},
      {config.state_dir, only(kTrustStateFileName)},
      {config.cache_dir, IsStampName},
  };
  for (const Target& target : targets) {
    for (const std::string& removed : RemoveStaleTemporaryFiles(target.directory, target.is_target)) {
      log::Info("boot: removed {}, left by an interrupted write", removed);
    }
  }
}

}  // namespace

int ExitCodeFor(DecisionSource source) {
  switch (source) {
    case DecisionSource::kServer:
      return kExitServerDecision;
    case DecisionSource::kLastGood:
      return kExitLastGoodDecision;
    case DecisionSource::kOffline:
      return kExitOfflineDecision;
  }
  return kExitNothingUsable;
}

absl::StatusOr<BootOutcome> RunBootFlow(const AgentConfig& config,
                                        BootDependencies& dependencies) {
  // The budget is monotonic time: a date stepped by NTP in the middle of
  // the boot neither spends it at once nor stretches it.
  const MonotonicTime budget_end = dependencies.clock->MonotonicNow() + config.budget;
  // A server that is down must not take the whole budget: the offline
  // fallback may still need to fetch the artifact of the last good path.
  const MonotonicTime resolve_end = budget_end - config.budget * kFallbackShareOfBudget;
  std::unique_ptr<BuildCache> owned_builds;
  BuildCache& builds = BuildsFor(dependencies.builds, config, dependencies.clock, owned_builds);
  RemoveStaleTemporaries(config);

  const absl::StatusOr<v1::HardwareProfile> profile = dependencies.probe();
  absl::StatusOr<DecisionRecord> last_good = LoadLastGood(config.state_dir);
  const DecisionRecord* last_good_record = last_good.ok() ? &*last_good : nullptr;
  // What the engine was last handed: room for a new build is never made by
  // evicting it or the last good one, the two a device can fall back on.
  const absl::StatusOr<DecisionRecord> handed_over = ReadDecisionFile(config.decision_file);
  const std::vector<const v1::Artifact*> keep =
      ArtifactsOf({last_good_record, handed_over.ok() ? &*handed_over : nullptr});
  std::string fallback_reason;
  bool trust_refused = false;
  std::vector<v1::ReportOutcomeRequest> unsent_reports;
  if (profile.ok()) {
    // Only a server decision for the model asked for can still stand.
    const v1::ResolveWeightPathResponse* held =
        last_good.ok() && SameModel(config, *last_good) ? &last_good->response : nullptr;
    absl::StatusOr<DecisionRecord> from_server =
        DecideWithServer(config, dependencies, *profile, held, resolve_end, budget_end, builds,
                         keep, &trust_refused, &unsent_reports);
    if (from_server.ok()) {
      // The new build becomes the last good one: the old needs no keeping.
      ASSIGN_OR_RETURN(BootOutcome outcome, HandOver(*std::move(from_server), "", config,
                                                     budget_end, builds, nullptr, false,
                                                     std::move(unsent_reports)));
      RememberLastGood(outcome.record, config.state_dir);
      return outcome;
    }
    fallback_reason = from_server.status().ToString();
  } else {
    fallback_reason = WithContext(profile.status(), "probe").ToString();
  }
  log::Warn("boot: no usable server decision: {}", fallback_reason);

  if (last_good.ok()) {
    absl::StatusOr<std::string> artifact_path = std::string();
    if (HasArtifact(last_good->response.artifact())) {
      absl::StatusOr<CachedBuild> cached = builds.CheckCached(last_good->response.artifact());
      artifact_path = cached.ok() ? absl::StatusOr<std::string>(cached->path)
                                  : absl::StatusOr<std::string>(cached.status());
    }
    if (artifact_path.ok() && SameModel(config, *last_good)) {
      DecisionRecord record = *last_good;
      record.source = DecisionSource::kLastGood;
      record.artifact_path = *artifact_path;
      return HandOver(std::move(record), fallback_reason, config, budget_end, builds, nullptr,
                      trust_refused, std::move(unsent_reports));
    }
    log::Warn("boot: last good decision unusable: {}",
              artifact_path.ok() ? "it was for another model" : artifact_path.status().ToString());
  } else if (last_good.status().code() != absl::StatusCode::kNotFound) {
    log::Warn("boot: last good decision unreadable: {}", last_good.status().ToString());
  }

  if (!profile.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no decision possible: ", fallback_reason, ", and no last good decision verifies"));
  }
  absl::StatusOr<v1::ResolveWeightPathResponse> offline = EvaluateOffline(*profile, config);
  if (!offline.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no decision possible: the server failed (", fallback_reason,
        "), no last good decision verifies, and the default policy refused the profile: ",
        offline.status().message()));
  }
  DecisionRecord record{*std::move(offline), "", DecisionSource::kOffline};
  if (last_good.ok() && SameModel(config, *last_good) &&
      last_good->response.weight_path().name() == record.response.weight_path().name() &&
      HasArtifact(last_good->response.artifact())) {
    // The catalog entry for this path is known from the last server
    // decision, and the artifact host may answer while the server does not.
    v1::ResolveWeightPathResponse known = record.response;
    *known.mutable_artifact() = last_good->response.artifact();
    known.set_model(last_good->response.model());
    absl::StatusOr<DecisionRecord> staged =
        StageDecision(builds, known, DecisionSource::kOffline, keep,
                      budget_end - dependencies.clock->MonotonicNow(), "boot");
    if (staged.ok()) {
      record = *std::move(staged);
    } else {
      log::Warn("boot: offline path {} has a known artifact, but it is unavailable: {}",
                record.response.weight_path().name(), staged.status().ToString());
    }
  }
  return HandOver(std::move(record), fallback_reason, config, budget_end, builds, last_good_record,
                  trust_refused, std::move(unsent_reports));
}

}  // namespace weightpath::agent
