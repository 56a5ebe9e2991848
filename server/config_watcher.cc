#include "server/config_watcher.h"

#include <exception>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "server/config/content_hash.h"
#include "server/config/demo_catalog.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {

absl::StatusOr<std::shared_ptr<const Snapshot>> LoadSnapshot(const ConfigSources& sources,
                                                              const std::atomic<bool>* cancel) {
  static_assert(kMaxConfigFileBytes == policy::kMaxPolicyBytes &&
                    kMaxConfigFileBytes == kMaxCatalogBytes,
                "a file the watcher reads must fit what its loader accepts");
  auto snapshot = std::make_shared<Snapshot>();
  if (sources.policy_path.empty()) {
    snapshot->policy = policy::DefaultPolicy();
  } else {
    ASSIGN_OR_RETURN(const std::string text,
                     ReadWholeFile(sources.policy_path, policy::kMaxPolicyBytes));
    ASSIGN_OR_RETURN(snapshot->policy, policy::LoadPolicy(text, sources.policy_path, cancel));
  }
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
    const ConfigSources& sources, const std::atomic<bool>* cancel) {
  try {
    return LoadSnapshot(sources, cancel);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory while loading the policy and catalog");
  } catch (const std::exception& error) {
    return absl::InternalError(
        absl::StrCat("unexpected error while loading the policy and catalog: ", error.what()));
  }
}

}  // namespace

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
  absl::StatusOr<std::shared_ptr<const Snapshot>> loaded =
      LoadSnapshotCatching(sources_, &cancel_);
  if (!loaded.ok()) {
    if (cancel_.load()) {
      spdlog::info("reload abandoned: shutting down");
      return Result::kCancelled;
    }
    spdlog::error("reload refused, the last good policy keeps serving: {}",
                  loaded.status().ToString());
    if (metrics_ != nullptr) metrics_->RecordReload(false);
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
  holder_->Publish(std::move(next));
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
