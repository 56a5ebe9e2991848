#include "agent/flow/run_loop.h"

#include <algorithm>
#include <cstddef>
#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/fetch/artifact_fetcher.h"
#include "agent/flow/apply_decision.h"
#include "agent/decision/engine_input.h"
#include "agent/engine/handover.h"
#include "agent/decision/last_good_store.h"
#include "agent/base/log.h"
#include "agent/report/outcome_report.h"
#include "agent/report/pending_reports.h"
#include "agent/decision/resolve_request.h"
#include "agent/net/retry_policy.h"
#include "agent/signed/trust_client.h"
#include "common/retry_pushback.h"
#include "google/protobuf/util/json_util.h"

namespace weightpath::agent {

absl::Duration JitteredInterval(absl::Duration interval, RandomSource& random) {
  return interval * random.Uniform(0.8, 1.2);
}

std::string BuildKey(const v1::ResolveWeightPathResponse& response) {
  std::string kwargs;
  google::protobuf::util::JsonPrintOptions options;
  // A Struct prints its keys in map order, so equal kwargs give equal text.
  (void)google::protobuf::util::MessageToJsonString(response.engine_kwargs(), &kwargs, options);
  return absl::StrCat(response.weight_path().name(), "|", response.model(), "|",
                      response.artifact().sha256(), "|", response.artifact().tokenizer(), "|",
                      kwargs);
}

absl::Duration ServerInterval(uint32_t suggested_seconds, const AgentConfig& config) {
  return std::clamp(absl::Seconds(suggested_seconds), config.min_resolve_interval,
                    config.max_resolve_interval);
}

RunLoop::RunLoop(const AgentConfig& config, RunDependencies& dependencies,
                 std::optional<DecisionRecord> current)
    : config_(config),
      dependencies_(dependencies),
      current_(std::move(current)),
      next_wait_(config.resolve_interval) {
  absl::StatusOr<DecisionRecord> last_good = LoadLastGood(config.state_dir);
  if (last_good.ok()) last_good_ = *std::move(last_good);
}

BuildCache& RunLoop::builds() {
  return BuildsFor(dependencies_.builds, config_, dependencies_.clock, owned_builds_);
}

void RunLoop::Report(v1::Outcome outcome, const v1::ResolveWeightPathResponse& about,
                     const std::string& detail, const DecisionRecord* staged) {
  unsent_.push_back(
      OutcomeReport(config_.device_id, outcome, about, detail, dependencies_.clock->Now()));
  if (staged != nullptr) AddDownloadedBytes(*staged, unsent_.back());
  // The run loop knows what the engine runs: whatever current_ is once the
  // event is over (the build it went back to after a rollback), unless going
  // back failed too.
  SetRunning(current_.has_value() && !engine_down_ ? &*current_ : nullptr, unsent_.back());
  FlushReports();
}

void RunLoop::FlushReports() {
  // The server's pushback, when it sends one, is minutes short of the next
  // pass: what it holds back waits for that.
  if (unsent_.empty() && !unsent_saved_) return;
  // Bounded like a boot: reports are sent before the pass resolves, and a
  // slow server must not keep the loop from following it for long.
  unsent_ = SendReports(std::move(unsent_), dependencies_.report, config_.call_timeout,
                        *dependencies_.clock,
                        dependencies_.clock->MonotonicNow() + config_.budget, "run");
  if (absl::Status saved = SavePendingReports(unsent_, config_.state_dir); !saved.ok()) {
    log::Warn("run: {}", saved.ToString());
    return;
  }
  unsent_saved_ = !unsent_.empty();
}

void RunLoop::QueueReports(std::vector<v1::ReportOutcomeRequest> reports) {
  unsent_saved_ = unsent_saved_ || !reports.empty();
  unsent_.insert(unsent_.end(), std::make_move_iterator(reports.begin()),
                 std::make_move_iterator(reports.end()));
}

absl::Status RunLoop::StartEngine(const DecisionRecord& record) {
  absl::Status handed_over = WriteHandover(record, config_.decision_file, config_.env_file);
  if (!handed_over.ok()) return handed_over;
  if (!config_.apply_command.empty()) {
    absl::Status applied = dependencies_.run_command(config_.apply_command, "apply_command");
    if (!applied.ok()) return applied;
  }
  if (!config_.engine_check_command.empty()) {
    absl::Status checked =
        dependencies_.run_command(config_.engine_check_command, "engine_check_command");
    if (!checked.ok()) return checked;
  }
  return absl::OkStatus();
}

PassResult RunLoop::Apply(const v1::ResolveWeightPathResponse& response,
                          const v1::HardwareProfile& profile) {
  DecisionRecord next;
  next.response = response;
  next.source = DecisionSource::kServer;
  if (HasArtifact(response.artifact())) {
    // (A malformed entry is the fetcher's to refuse, below.)
    if (dependencies_.trust != nullptr && ValidateArtifact(response.artifact()).ok()) {
      const absl::Status verdict = CheckArtifactForDevice(
          *dependencies_.trust, response.artifact(), profile,
          current_.has_value() ? &current_->response.artifact() : nullptr);
      if (!verdict.ok()) {
        log::Error("run: trust: new artifact for {} refused, keeping the current decision: {}",
                      response.weight_path().name(), verdict.ToString());
        // Tried again on the next pass (the metadata may be current by
        // then), reported once per build.
        if (BuildKey(response) != trust_reported_build_) {
          trust_reported_build_ = BuildKey(response);
          Report(v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED, response,
                 std::string(verdict.message()));
        }
        return PassResult::kFetchFailed;
      }
    }
    absl::StatusOr<DecisionRecord> staged =
        StageDecision(builds(), response, DecisionSource::kServer,
                      ArtifactsOf({current_.has_value() ? &*current_ : nullptr,
                                   last_good_.has_value() ? &*last_good_ : nullptr}),
                      config_.budget, "run");
    if (!staged.ok()) {
      log::Warn("run: new artifact for {} unusable: {}", response.weight_path().name(),
                staged.status().ToString());
      // Bytes that are not the build are a verdict on it, tried again only
      // on the server's retry schedule (RetryWait); a disk it does not fit may have room
      // later, so it is tried on each pass and reported once; a network
      // hiccup is neither, and the next pass simply resumes.
      const std::optional<v1::Outcome> outcome = OutcomeOfStagingFailure(staged.status());
      if (outcome == v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED) {
        Reject(response);
        Report(*outcome, response, std::string(staged.status().message()));
      } else if (outcome == v1::OUTCOME_CACHE_FULL && cache_full_build_ != BuildKey(response)) {
        cache_full_build_ = BuildKey(response);
        Report(*outcome, response, std::string(staged.status().message()));
      }
      return PassResult::kFetchFailed;
    }
    next = *std::move(staged);
  }

  const absl::Status started = StartEngine(next);
  if (started.ok()) {
    log::Info("run: engine runs path={} rollout={}", response.weight_path().name(),
                 response.rollout().rollout_id().empty() ? "none" : response.rollout().rollout_id());
    const absl::Status saved = SaveLastGood(next, config_.state_dir);
    if (!saved.ok()) log::Warn("run: last good decision not saved: {}", saved.ToString());
    current_ = std::move(next);
    last_good_ = current_;
    cache_full_build_.clear();
    engine_down_ = false;
    ForgetRejected();
    Report(v1::OUTCOME_ENGINE_STARTED, response, "", &*current_);
    AfterHandOver(builds(), *current_, ArtifactsOf({&*current_}), "run");
    return PassResult::kApplied;
  }

  log::Error("run: new build failed, going back: {}", started.ToString());
  Reject(response);
  Report(v1::OUTCOME_ENGINE_START_FAILED, response, std::string(started.message()), &next);
  std::string rollback_detail = "back on the previous decision";
  if (current_.has_value()) {
    const absl::Status restored = StartEngine(*current_);
    engine_down_ = !restored.ok();
    if (!restored.ok()) {
      rollback_detail = absl::StrCat("previous decision restored but: ", restored.message());
      log::Error("run: previous build did not come back cleanly: {}", restored.ToString());
    }
  } else {
    rollback_detail = "no previous decision to go back to";
  }
  Report(v1::OUTCOME_ROLLED_BACK, response, rollback_detail);
  return PassResult::kRolledBack;
}

void RunLoop::Reject(const v1::ResolveWeightPathResponse& response) {
  const std::string build = BuildKey(response);
  rejected_failures_ = build == rejected_build_ ? rejected_failures_ + 1 : 1;
  rejected_build_ = build;
  rejected_at_ = dependencies_.clock->MonotonicNow();
}

void RunLoop::ForgetRejected() {
  rejected_build_.clear();
  rejected_failures_ = 0;
}

std::optional<absl::Duration> RunLoop::RetryWait(
    const v1::ResolveWeightPathResponse& response) const {
  if (response.failed_build_retry_seconds() == 0) return std::nullopt;
  // Doubling: a build that fails for good costs the fleet few retries (at
  // the longest, one every 16 days), yet one that failed on a passing cause
  // (a full disk since cleared, a mirror that served bad bytes) is back soon.
  const int doublings = std::min(rejected_failures_ - 1, kMaxRetryDoublings);
  // A server's 1 s would have a failing build fetched and started on every
  // pass, its 4294967295 s never: held like the resolve interval.
  // (max of min: a configured min_resolve_interval above 24 h wins.)
  const absl::Duration base =
      std::max(config_.min_resolve_interval,
               std::min(absl::Seconds(response.failed_build_retry_seconds()), kMaxRetryInterval));
  return base * (1 << std::max(doublings, 0));
}

PassResult RunLoop::RunOnce() {
  FlushReports();
  next_wait_ = JitteredInterval(config_.resolve_interval, *dependencies_.random);
  absl::StatusOr<v1::HardwareProfile> profile = dependencies_.probe();
  if (!profile.ok()) {
    log::Warn("run: probe failed: {}", profile.status().ToString());
    return PassResult::kResolveFailed;
  }
  // Only a server decision has an etag the server can recognise.
  const v1::ResolveWeightPathResponse* held =
      current_.has_value() && !current_->response.decision_etag().empty() ? &current_->response
                                                                           : nullptr;
  absl::StatusOr<v1::ResolveWeightPathResponse> answer =
      dependencies_.resolve(ResolveRequest(config_, *profile, dependencies_.agent_version, held),
                            config_.call_timeout);
  if (!answer.ok()) {
    log::Warn("run: resolve failed, keeping the current decision: {}",
                 answer.status().ToString());
    // A server shedding load said when to come back; never sooner.
    if (const std::optional<absl::Duration> pushback = RetryPushback(answer.status());
        pushback.has_value() && *pushback != absl::InfiniteDuration()) {
      next_wait_ = std::max(next_wait_, std::min(*pushback, config_.max_resolve_interval));
    }
    return PassResult::kResolveFailed;
  }
  // Each pass that reached the server updates the signed metadata, so the
  // device follows root rotations and sees expiry while nothing changes.
  if (dependencies_.trust != nullptr) dependencies_.trust->Update(config_.budget).IgnoreError();
  if (answer->resolve_interval_seconds() > 0) {
    const uint32_t suggested = answer->resolve_interval_seconds();
    const absl::Duration bounded = ServerInterval(suggested, config_);
    // Once per value the server keeps suggesting, not at every pass.
    if (bounded != absl::Seconds(suggested) && warned_interval_ != suggested) {
      log::Warn("run: the server suggests resolving every {} s; using {} (min_resolve_interval {}, "
                "max_resolve_interval {})",
                suggested, absl::FormatDuration(bounded),
                absl::FormatDuration(config_.min_resolve_interval),
                absl::FormatDuration(config_.max_resolve_interval));
      warned_interval_ = suggested;
    }
    next_wait_ = JitteredInterval(bounded, *dependencies_.random);
  }
  if (answer->unchanged()) {
    absl::StatusOr<v1::ResolveWeightPathResponse> kept = DecisionFromAnswer(*answer, held);
    if (!kept.ok()) {
      log::Warn("run: keeping the current decision: {}", kept.status().ToString());
      return PassResult::kResolveFailed;
    }
    ForgetRejected();
    return PassResult::kUnchanged;
  }
  const absl::StatusOr<v1::ResolveWeightPathResponse>& response = answer;
  // Checked before the build is compared, fetched or written: even a new
  // attribution of the running build rewrites the hand-over files.
  if (absl::Status usable = ValidateForEngine(DecisionRecord{*response, "", DecisionSource::kServer, {}});
      !usable.ok()) {
    log::Error("run: server decision refused, keeping the current one: {}", usable.ToString());
    return PassResult::kRefusedDecision;
  }

  const std::string build = BuildKey(*response);
  if (current_.has_value() && BuildKey(current_->response) == build) {
    ForgetRejected();
    if (current_->response.rollout().rollout_id() != response->rollout().rollout_id()) {
      // Same build, new attribution (e.g. the device joined a rollout whose
      // action it already satisfies): the engine already runs it, so say so
      // for the new rollout instead of staying silent until the timeout.
      current_->response = *response;
      const absl::Status written = WriteHandover(*current_, config_.decision_file, config_.env_file);
      if (!written.ok()) log::Warn("run: decision file not updated: {}", written.ToString());
      if (!response->rollout().rollout_id().empty()) {
        Report(v1::OUTCOME_ENGINE_STARTED, *response, "build already running");
      }
    }
    return PassResult::kUnchanged;
  }
  if (build == rejected_build_) {
    const std::optional<absl::Duration> wait = RetryWait(*response);
    const absl::Duration waited = dependencies_.clock->MonotonicNow() - rejected_at_;
    if (!wait.has_value() || waited < *wait) return PassResult::kSkippedRejected;
    log::Info("run: trying build {} again: it failed {} time(s), the last {} ago "
              "(the server's failed_build_retry_seconds {})",
              response->weight_path().name(), rejected_failures_, absl::FormatDuration(waited),
              response->failed_build_retry_seconds());
  }
  return Apply(*response, *profile);
}

void RunLoop::Run(const std::function<bool()>& keep_going) {
  while (keep_going()) {
    RunOnce();
    dependencies_.clock->SleepFor(next_wait_);
  }
}

}  // namespace weightpath::agent
