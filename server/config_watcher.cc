#include "server/config_watcher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/content_hash.h"
#include "server/demo_catalog.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {

absl::StatusOr<std::shared_ptr<const Snapshot>> LoadSnapshot(const ConfigSources& sources) {
  auto snapshot = std::make_shared<Snapshot>();
  if (sources.policy_path.empty()) {
    snapshot->policy = policy::DefaultPolicy();
  } else {
    ASSIGN_OR_RETURN(const std::string text,
                     ReadWholeFile(sources.policy_path, kMaxConfigFileBytes));
    ASSIGN_OR_RETURN(snapshot->policy, policy::LoadPolicy(text, sources.policy_path));
  }
  // The catalog is validated against the policy it will be served with, so
  // a policy that adds a path and a catalog lacking it are refused together.
  if (sources.catalog_path.empty()) {
    ASSIGN_OR_RETURN(snapshot->catalog,
                     LoadCatalog(DemoCatalogYaml(), kDemoCatalogSourceName, *snapshot->policy));
  } else {
    ASSIGN_OR_RETURN(const std::string text,
                     ReadWholeFile(sources.catalog_path, kMaxConfigFileBytes));
    ASSIGN_OR_RETURN(snapshot->catalog,
                     LoadCatalog(text, sources.catalog_path, *snapshot->policy));
  }
  return std::shared_ptr<const Snapshot>(std::move(snapshot));
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
    catalog_fingerprint_ = TakeFingerprint(sources_.catalog_path);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> snapshot, LoadSnapshot(sources_));
  spdlog::info("loaded policy {} from {} and catalog {} from {}", snapshot->policy->version(),
               snapshot->policy->source_name(), snapshot->catalog->version(),
               snapshot->catalog->source_name());
  if (metrics_ != nullptr) {
    metrics_->SetPolicyInfo(snapshot->policy->version(), snapshot->catalog->version());
  }
  holder_->Publish(std::move(snapshot));
  return absl::OkStatus();
}

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
    FileFingerprint now = TakeFingerprint(sources_.catalog_path);
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
    catalog_fingerprint_ = TakeFingerprint(sources_.catalog_path);
  }
  return Reload();
}

ConfigWatcher::Result ConfigWatcher::Reload() {
  absl::StatusOr<std::shared_ptr<const Snapshot>> loaded = LoadSnapshot(sources_);
  if (!loaded.ok()) {
    spdlog::error("reload refused, the last good policy keeps serving: {}",
                  loaded.status().ToString());
    if (metrics_ != nullptr) metrics_->RecordReload(false);
    return Result::kRefused;
  }
  std::shared_ptr<const Snapshot> next = *std::move(loaded);
  const std::shared_ptr<const Snapshot> current = holder_->Share();
  // A touch, or a ConfigMap resync with identical content, is not a reload.
  if (current != nullptr && current->policy->version() == next->policy->version() &&
      current->catalog->version() == next->catalog->version()) {
    return Result::kUnchanged;
  }
  spdlog::info("reloaded: policy {} -> {}, catalog {} -> {}",
               current ? current->policy->version() : "none", next->policy->version(),
               current ? current->catalog->version() : "none", next->catalog->version());
  if (metrics_ != nullptr) {
    metrics_->RecordReload(true);
    metrics_->SetPolicyInfo(next->policy->version(), next->catalog->version());
  }
  holder_->Publish(std::move(next));
  return Result::kReloaded;
}

void ConfigWatcher::Start() {
  if (poll_interval_ <= absl::ZeroDuration()) return;
  if (sources_.policy_path.empty() && sources_.catalog_path.empty()) return;
  poll_thread_ = std::thread([this] { PollLoop(); });
}

void ConfigWatcher::Stop() {
  {
    absl::MutexLock lock(&stop_mutex_);
    stopping_ = true;
  }
  if (poll_thread_.joinable()) poll_thread_.join();
}

void ConfigWatcher::PollLoop() {
  absl::MutexLock lock(&stop_mutex_);
  while (!stop_mutex_.AwaitWithTimeout(absl::Condition(&stopping_), poll_interval_)) {
    stop_mutex_.Unlock();
    CheckNow();
    stop_mutex_.Lock();
  }
}

}  // namespace weightpath::server
