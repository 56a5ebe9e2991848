#include "server/config_watcher.h"

#include <exception>
#include <new>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "server/api/audit_event.h"
#include "server/config/content_hash.h"
#include "server/config/demo_catalog.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {

absl::StatusOr<std::shared_ptr<const Snapshot>> LoadSnapshot(const ConfigSources& sources,
                                                              const std::atomic<bool>* cancel,
                                                              std::string* policy_sha256) {
  static_assert(kMaxConfigFileBytes == policy::kMaxPolicyBytes &&
                    kMaxConfigFileBytes == kMaxCatalogBytes,
                "a file the watcher reads must fit what its loader accepts");
  auto snapshot = std::make_shared<Snapshot>();
  if (policy_sha256 != nullptr) policy_sha256->clear();
  if (sources.policy_path.empty()) {
    snapshot->policy = policy::DefaultPolicy();
    const std::string_view bundled = policy::DefaultPolicyYaml();
    snapshot->policy_sha256 = Sha256Hex(absl::string_view(bundled.data(), bundled.size()));
  } else {
    ASSIGN_OR_RETURN(const std::string text,
                     ReadWholeFile(sources.policy_path, policy::kMaxPolicyBytes));
    snapshot->policy_sha256 = Sha256Hex(text);
    if (policy_sha256 != nullptr) *policy_sha256 = snapshot->policy_sha256;
    ASSIGN_OR_RETURN(snapshot->policy, policy::LoadPolicy(text, sources.policy_path, cancel));
  }
  if (policy_sha256 != nullptr) *policy_sha256 = snapshot->policy_sha256;
  // The catalog is validated against the policy it will be served with, so
  // a policy that adds a path and a catalog lacking it are refused together.
  if (sources.signed_catalog != nullptr) {
    ASSIGN_OR_RETURN(snapshot->catalog, sources.signed_catalog->Load(*snapshot->policy, cancel));
  } else if (sources.catalog_path.empty()) {
    ASSIGN_OR_RETURN(snapshot->catalog, LoadCatalog(DemoCatalogYaml(), kDemoCatalogSourceName,
                                                    *snapshot->policy, cancel));
  } else {
    ASSIGN_OR_RETURN(const std::string text,
                     ReadWholeFile(sources.catalog_path, kMaxCatalogBytes));
    ASSIGN_OR_RETURN(snapshot->catalog,
                     LoadCatalog(text, sources.catalog_path, *snapshot->policy, cancel));
  }
  return std::shared_ptr<const Snapshot>(std::move(snapshot));
}

namespace {

// The loaders bound what a document may cost, so running out of memory here
// means the limits were not enough for this machine; either way a reload
// must never end the process, and the last good snapshot serves on.
absl::StatusOr<std::shared_ptr<const Snapshot>> LoadSnapshotCatching(
    const ConfigSources& sources, const std::atomic<bool>* cancel,
    std::string* policy_sha256 = nullptr) {
  try {
    return LoadSnapshot(sources, cancel, policy_sha256);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory while loading the policy and catalog");
  } catch (const std::exception& error) {
    return absl::InternalError(
        absl::StrCat("unexpected error while loading the policy and catalog: ", error.what()));
  }
}

std::string PolicySourceName(const ConfigSources& sources) {
  return sources.policy_path.empty() ? "bundled policy" : sources.policy_path;
}

PolicyLoad LoadedFrom(const ConfigSources& sources, const Snapshot& snapshot, bool at_start) {
  PolicyLoad load;
  load.kind = PolicyLoad::Kind::kLoaded;
  load.at_start = at_start;
  load.time = absl::Now();
  load.policy_version = snapshot.policy->version();
  load.policy_sha256 = snapshot.policy_sha256;
  load.policy_source = PolicySourceName(sources);
  load.catalog_version = snapshot.catalog->version();
  return load;
}

}  // namespace

std::string PolicyLoadSummary(const PolicyLoad& load) {
  // Protobuf text format, as the operators' calls' summaries read; the
  // digest comes before the path so that a long path cannot cut it off.
  const auto quoted = [](absl::string_view text) {
    return absl::StrCat("\"", absl::CEscape(text), "\"");
  };
  const bool refused = load.kind == PolicyLoad::Kind::kRefused;
  std::string summary = absl::StrCat("trigger: ", load.at_start ? "\"start\"" : "\"reload\"");
  if (!refused) absl::StrAppend(&summary, " policy_version: ", quoted(load.policy_version));
  if (!load.policy_sha256.empty()) {
    absl::StrAppend(&summary, refused ? " refused_sha256: " : " sha256: ",
                    quoted(load.policy_sha256));
  }
  absl::StrAppend(&summary, " source: ", quoted(load.policy_source));
  if (refused) absl::StrAppend(&summary, " serving_policy_version: ", quoted(load.policy_version));
  if (!load.catalog_version.empty()) {
    absl::StrAppend(&summary, " catalog_version: ", quoted(load.catalog_version));
  }
  return AuditText(summary, kAuditSummaryMaxBytes);
}

std::string PolicyLoadMessage(const PolicyLoad& load) {
  std::string message;
  if (load.kind == PolicyLoad::Kind::kLoaded) {
    message = absl::StrCat(load.at_start ? "loaded at start" : "reloaded", ": policy ",
                           load.policy_version, " (file sha256 ", load.policy_sha256, ") from ",
                           load.policy_source, ", catalog ", load.catalog_version);
  } else {
    message = absl::StrCat("reload refused, policy ", load.policy_version,
                           " keeps serving: ", load.refusal.message());
  }
  return AuditText(message, kAuditMessageMaxBytes);
}

ConfigWatcher::ConfigWatcher(ConfigSources sources, SnapshotHolder* holder,
                             ServerMetrics* metrics, absl::Duration poll_interval)
    : sources_(std::move(sources)),
      holder_(holder),
      metrics_(metrics),
      poll_interval_(poll_interval) {}

ConfigWatcher::~ConfigWatcher() { Stop(); }

absl::Status ConfigWatcher::LoadInitial() {
  absl::MutexLock lock(&reload_mutex_);
  // Fingerprints first: a change that lands during the load is then seen as
  // a change by the next poll instead of being missed.
  if (!sources_.policy_path.empty()) policy_fingerprint_ = TakeFingerprint(sources_.policy_path);
  if (!sources_.catalog_path.empty()) {
    catalog_fingerprint_ = TakeFingerprint(sources_.catalog_watch_path());
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> snapshot,
                   LoadSnapshotCatching(sources_, &cancel_));
  spdlog::info("loaded policy {} from {} and catalog {} from {}, {}", snapshot->policy->version(),
               snapshot->policy->source_name(), snapshot->catalog->version(),
               snapshot->catalog->source_name(), snapshot->catalog->trust().summary);
  if (!snapshot->catalog->trust().coverage_warning.empty()) {
    spdlog::warn("catalog {}: {}", snapshot->catalog->version(),
                 snapshot->catalog->trust().coverage_warning);
  }
  if (metrics_ != nullptr) {
    metrics_->SetPolicyInfo(snapshot->policy->version(), snapshot->catalog->version());
    metrics_->SetCatalogTrust(snapshot->catalog->trust());
  }
  initial_load_ = LoadedFrom(sources_, *snapshot, /*at_start=*/true);
  holder_->Publish(std::move(snapshot));
  return absl::OkStatus();
}

void ConfigWatcher::SetLoadListener(std::function<void(const PolicyLoad&)> listener) {
  absl::MutexLock lock(&reload_mutex_);
  load_listener_ = std::move(listener);
}

PolicyLoad ConfigWatcher::InitialLoad() const { return initial_load_; }

ConfigWatcher::Result ConfigWatcher::CheckNow() {
  absl::MutexLock lock(&reload_mutex_);
  bool changed = false;
  if (!sources_.policy_path.empty()) {
    FileFingerprint now = TakeFingerprint(sources_.policy_path);
    if (now != policy_fingerprint_) {
      policy_fingerprint_ = std::move(now);
      changed = true;
    }
  }
  if (!sources_.catalog_path.empty()) {
    FileFingerprint now = TakeFingerprint(sources_.catalog_watch_path());
    if (now != catalog_fingerprint_) {
      catalog_fingerprint_ = std::move(now);
      changed = true;
    }
  }
  return changed ? Reload() : Result::kUnchanged;
}

ConfigWatcher::Result ConfigWatcher::ReloadNow() {
  absl::MutexLock lock(&reload_mutex_);
  if (!sources_.policy_path.empty()) policy_fingerprint_ = TakeFingerprint(sources_.policy_path);
  if (!sources_.catalog_path.empty()) {
    catalog_fingerprint_ = TakeFingerprint(sources_.catalog_watch_path());
  }
  return Reload();
}

ConfigWatcher::Result ConfigWatcher::Reload() {
  std::string read_sha256;
  absl::StatusOr<std::shared_ptr<const Snapshot>> loaded =
      LoadSnapshotCatching(sources_, &cancel_, &read_sha256);
  if (!loaded.ok()) {
    if (cancel_.load()) {
      spdlog::info("reload abandoned: shutting down");
      return Result::kCancelled;
    }
    spdlog::error("reload refused, the last good policy keeps serving: {}",
                  loaded.status().ToString());
    if (metrics_ != nullptr) metrics_->RecordReload(false);
    if (load_listener_) {
      PolicyLoad refused;
      refused.kind = PolicyLoad::Kind::kRefused;
      refused.time = absl::Now();
      const std::shared_ptr<const Snapshot> serving = holder_->Share();
      if (serving != nullptr) {
        refused.policy_version = serving->policy->version();
        refused.catalog_version = serving->catalog->version();
      }
      refused.policy_sha256 = read_sha256;
      refused.policy_source = PolicySourceName(sources_);
      refused.refusal = loaded.status();
      load_listener_(refused);
    }
    return Result::kRefused;
  }
  std::shared_ptr<const Snapshot> next = *std::move(loaded);
  const std::shared_ptr<const Snapshot> current = holder_->Share();
  // A new timestamp alone moves the expiry, not the catalog.
  if (metrics_ != nullptr) metrics_->SetCatalogTrust(next->catalog->trust());
  // A touch, or a ConfigMap resync with identical content, is not a reload.
  if (current != nullptr && current->policy->version() == next->policy->version() &&
      current->catalog->version() == next->catalog->version()) {
    return Result::kUnchanged;
  }
  spdlog::info("reloaded: policy {} -> {}, catalog {} -> {}, {}",
               current ? current->policy->version() : "none", next->policy->version(),
               current ? current->catalog->version() : "none", next->catalog->version(),
               next->catalog->trust().summary);
  if (!next->catalog->trust().coverage_warning.empty()) {
    spdlog::warn("catalog {}: {}", next->catalog->version(), next->catalog->trust().coverage_warning);
  }
  if (metrics_ != nullptr) {
    metrics_->RecordReload(true);
    metrics_->SetPolicyInfo(next->policy->version(), next->catalog->version());
  }
  // A reload that changed only the catalog put no new policy in force.
  const bool new_policy = current == nullptr || current->policy->version() != next->policy->version();
  std::optional<PolicyLoad> load;
  if (new_policy && load_listener_) load = LoadedFrom(sources_, *next, /*at_start=*/false);
  holder_->Publish(std::move(next));
  if (load.has_value()) load_listener_(*load);
  return Result::kReloaded;
}

void ConfigWatcher::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void ConfigWatcher::RequestReload() {
  absl::MutexLock lock(&wake_mutex_);
  reload_requested_ = true;
}

void ConfigWatcher::BeginStop() {
  cancel_.store(true);
  absl::MutexLock lock(&wake_mutex_);
  stopping_ = true;
}

void ConfigWatcher::Stop() {
  BeginStop();
  if (thread_.joinable()) thread_.join();
}

void ConfigWatcher::Run() {
  NameThisThread("wp-reload");
  const bool polls = poll_interval_ > absl::ZeroDuration() &&
                     (!sources_.policy_path.empty() || !sources_.catalog_path.empty());
  auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(wake_mutex_) {
    return stopping_ || reload_requested_;
  };
  for (;;) {
    bool requested = false;
    {
      absl::MutexLock lock(&wake_mutex_);
      if (polls) {
        wake_mutex_.AwaitWithTimeout(absl::Condition(&woken), poll_interval_);
      } else {
        wake_mutex_.Await(absl::Condition(&woken));
      }
      if (stopping_) return;
      requested = std::exchange(reload_requested_, false);
    }
    if (requested) {
      ReloadNow();
    } else {
      CheckNow();
    }
  }
}

}  // namespace weightpath::server
