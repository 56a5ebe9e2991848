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

// With a trust block: the metadata updated, then the verdict on the
// answer's artifact for this device. `held` (the last good decision) names
// the artifact already installed. A refusal is reported to the server,
// which has just answered, within what is left of the budget; a report it
// does not take then goes to `unsent`, to wait with the pending reports.
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
  const absl::Duration left =
      std::min(config.call_timeout, budget_end - dependencies.clock->MonotonicNow());
  if (!dependencies.report) return verdict;
  v1::ReportOutcomeRequest report =
      OutcomeReport(config.device_id, v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED, decision,
                    std::string(verdict.message()), dependencies.clock->Now());
  const absl::Status sent = left > absl::ZeroDuration()
                                ? dependencies.report(report, left)
                                : absl::DeadlineExceededError("no time left in the budget");
  if (sent.ok()) {
    log::Info("boot: reported OUTCOME_ARTIFACT_VERIFICATION_FAILED");
  } else {
    log::Warn("boot: OUTCOME_ARTIFACT_VERIFICATION_FAILED not reported: {}", sent.ToString());
    if (IsRetryable(sent.code())) unsent->push_back(std::move(report));
  }
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
                                                ArtifactFetcher& fetcher, bool* trust_refused,
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
  absl::StatusOr<FetchResult> fetched = fetcher.Fetch(
      record.response.artifact(), budget_end - dependencies.clock->MonotonicNow());
  if (!fetched.ok()) return WithContext(fetched.status(), "artifact");
  if (fetched->downloaded) {
    log::Info("boot: downloaded {} bytes of {} (resumed from byte {})",
                 fetched->bytes_transferred, record.response.artifact().uri(),
                 fetched->resumed_from);
  } else {
    log::Info("boot: artifact {} already cached and verified ({})", fetched->path,
                 fetched->hashed ? "hashed" : "stamp trusted");
  }
  record.artifact_path = fetched->path;
  record.source = DecisionSource::kServer;
  return record;
}

absl::StatusOr<BootOutcome> HandOver(DecisionRecord record, std::string fallback_reason,
                                     const AgentConfig& config, MonotonicTime budget_end,
                                     bool trust_refused = false,
                                     std::vector<v1::ReportOutcomeRequest> unsent = {}) {
  if (absl::Status written = WriteHandover(record, config.decision_file, config.env_file);
      !written.ok()) {
    return WithContext(written, "hand-over");
  }
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
  ArtifactFetcher fetcher(config.cache_dir, dependencies.clock, kDefaultReverifyAfter);
  fetcher.set_free_space_reserve(config.cache_reserve_bytes);
  RemoveStaleTemporaries(config);

  const absl::StatusOr<v1::HardwareProfile> profile = dependencies.probe();
  absl::StatusOr<DecisionRecord> last_good = LoadLastGood(config.state_dir);
  std::string fallback_reason;
  bool trust_refused = false;
  std::vector<v1::ReportOutcomeRequest> unsent_reports;
  if (profile.ok()) {
    // Only a server decision for the model asked for can still stand.
    const v1::ResolveWeightPathResponse* held =
        last_good.ok() && SameModel(config, *last_good) ? &last_good->response : nullptr;
    absl::StatusOr<DecisionRecord> from_server =
        DecideWithServer(config, dependencies, *profile, held, resolve_end, budget_end, fetcher,
                         &trust_refused, &unsent_reports);
    if (from_server.ok()) {
      ASSIGN_OR_RETURN(BootOutcome outcome,
                       HandOver(*std::move(from_server), "", config, budget_end));
      RememberLastGood(outcome.record, config.state_dir);
      return outcome;
    }
    fallback_reason = from_server.status().ToString();
  } else {
    fallback_reason = WithContext(profile.status(), "probe").ToString();
  }
  log::Warn("boot: no usable server decision: {}", fallback_reason);

  if (last_good.ok()) {
    absl::StatusOr<std::string> artifact_path = fetcher.VerifyCached(last_good->response.artifact());
    if (artifact_path.ok() && SameModel(config, *last_good)) {
      DecisionRecord record = *last_good;
      record.source = DecisionSource::kLastGood;
      record.artifact_path = *artifact_path;
      return HandOver(std::move(record), fallback_reason, config, budget_end, trust_refused,
                      std::move(unsent_reports));
    }
    log::Warn("boot: last good decision unusable: {}",
                 artifact_path.ok() ? "it was for another model"
                                    : artifact_path.status().ToString());
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
      last_good->response.weight_path().name() == record.response.weight_path().name()) {
    // The catalog entry for this path is known from the last server
    // decision, and the artifact host may answer while the server does not.
    absl::StatusOr<FetchResult> fetched = fetcher.Fetch(
        last_good->response.artifact(), budget_end - dependencies.clock->MonotonicNow());
    if (fetched.ok()) {
      *record.response.mutable_artifact() = last_good->response.artifact();
      record.response.set_model(last_good->response.model());
      record.artifact_path = fetched->path;
    } else {
      log::Warn("boot: offline path {} has a known artifact, but it is unavailable: {}",
                   record.response.weight_path().name(), fetched.status().ToString());
    }
  }
  return HandOver(std::move(record), fallback_reason, config, budget_end, trust_refused,
                      std::move(unsent_reports));
}

}  // namespace weightpath::agent
