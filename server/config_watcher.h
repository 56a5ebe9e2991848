// Loads the policy and catalog pair, and keeps it current: polls both files
// (and reloads on request, e.g. SIGHUP), validates the new pair whole, then
// publishes it; a pair that fails validation is refused, logged, counted,
// and the last good one keeps serving.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/config/file_fingerprint.h"
#include "server/observability/metrics.h"
#include "server/config/policy_snapshot.h"
#include "server/config/signed_catalog.h"

namespace weightpath::server {

// Empty paths mean the embedded defaults (bundled policy, demo catalog).
struct ConfigSources {
  ConfigSources() = default;
  ConfigSources(std::string policy, std::string catalog,
                std::shared_ptr<SignedCatalogSource> signed_source = nullptr)
      : policy_path(std::move(policy)),
        catalog_path(std::move(catalog)),
        signed_catalog(std::move(signed_source)) {}

  std::string policy_path;
  std::string catalog_path;
  // Set when catalog_path is a TUF repository: the catalog is its verified
  // targets (catalog_path itself is then not read as YAML).
  std::shared_ptr<SignedCatalogSource> signed_catalog;

  // The file whose change means "reload the catalog": the YAML file, or the
  // repository's timestamp.json (publishers write it last).
  std::string catalog_watch_path() const {
    return signed_catalog != nullptr ? signed_catalog->watch_path() : catalog_path;
  }
};

// The most either file may hold (the policy's and the catalog's own limits
// are the same 16 MiB, aliases expanded included).
inline constexpr size_t kMaxConfigFileBytes = 16 * 1024 * 1024;

// Reads and validates both documents into one snapshot. `cancel`, when set
// from another thread, makes a load in progress return CANCELLED promptly.
// `policy_sha256`, when given, gets the digest of the policy bytes read
// (also when the load is then refused; empty if the file could not be read).
absl::StatusOr<std::shared_ptr<const Snapshot>> LoadSnapshot(
    const ConfigSources& sources, const std::atomic<bool>* cancel = nullptr,
    std::string* policy_sha256 = nullptr);

// The audit trail's caller for policy loads: who edited the file cannot be
// known, so the file itself is named.
inline constexpr char kPolicyFileIdentity[] = "server:policy-file";

// One load the audit trail records (server.cc turns it into an AuditEvent):
// the policy a start or reload put in force, or a reload that was refused.
struct PolicyLoad {
  enum class Kind { kLoaded, kRefused };
  Kind kind = Kind::kLoaded;
  bool at_start = false;
  absl::Time time;
  // kLoaded: the policy now served. kRefused: the one that keeps serving.
  std::string policy_version;
  std::string policy_sha256;  // kRefused: of the refused file's bytes ("" if unread)
  std::string policy_source;  // the --policy path, or "bundled policy"
  std::string catalog_version;
  absl::Status refusal;       // kRefused: why
};

// Formats a load for the audit trail: the one-line summary (version, sha256,
// source, catalog) and the words shown in weightpathctl audit's table.
std::string PolicyLoadSummary(const PolicyLoad& load);
std::string PolicyLoadMessage(const PolicyLoad& load);

class ConfigWatcher {
 public:
  // kCancelled: the watcher was stopping, the reload was abandoned.
  enum class Result { kUnchanged, kReloaded, kRefused, kCancelled };

  // `metrics` may be null (tests of the reload logic alone).
  ConfigWatcher(ConfigSources sources, SnapshotHolder* holder, ServerMetrics* metrics,
                absl::Duration poll_interval);
  ~ConfigWatcher();
  ConfigWatcher(const ConfigWatcher&) = delete;
  ConfigWatcher& operator=(const ConfigWatcher&) = delete;

  // The first load, before serving: an error here means the server must not
  // start. Publishes the snapshot into the holder.
  absl::Status LoadInitial();
  // Told of every reload that puts a new policy in force and every refused
  // reload, on the reloading thread after the snapshot is published. Set it
  // before Start(); the first load (before the store exists) is the
  // caller's to record (InitialLoad()).
  void SetLoadListener(std::function<void(const PolicyLoad&)> listener);
  // The first load as a PolicyLoad; valid after LoadInitial() succeeded.
  PolicyLoad InitialLoad() const;
  // Reloads when either file's fingerprint moved since the last attempt.
  Result CheckNow();
  // Reloads regardless of fingerprints, on the calling thread.
  Result ReloadNow();

  // Starts the watcher's thread: it polls CheckNow() every poll_interval (a
  // zero interval disables polling) and runs requested reloads.
  void Start();
  // SIGHUP: asks the watcher's thread for a ReloadNow() and returns at once,
  // so the caller (the thread that also waits for SIGTERM) is never held by
  // a reload. Requests made while one is pending are one reload.
  void RequestReload();
  // Abandons a reload in progress and tells the thread to end, without
  // waiting: shutdown calls it first so the reload winds down while in-flight
  // calls finish.
  void BeginStop();
  // BeginStop(), then waits for the thread. A reload in progress stops at
  // its next cancellation point (milliseconds apart while YAML is read or
  // totality is checked).
  void Stop();

 private:
  Result Reload() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reload_mutex_);
  void Run();

  const ConfigSources sources_;
  SnapshotHolder* const holder_;
  ServerMetrics* const metrics_;
  const absl::Duration poll_interval_;

  // Read by the policy and catalog loaders while they run.
  std::atomic<bool> cancel_{false};

  absl::Mutex reload_mutex_;
  std::function<void(const PolicyLoad&)> load_listener_ ABSL_GUARDED_BY(reload_mutex_);
  PolicyLoad initial_load_;  // written once by LoadInitial(), before any thread starts
  FileFingerprint policy_fingerprint_ ABSL_GUARDED_BY(reload_mutex_);
  FileFingerprint catalog_fingerprint_ ABSL_GUARDED_BY(reload_mutex_);

  absl::Mutex wake_mutex_;
  bool stopping_ ABSL_GUARDED_BY(wake_mutex_) = false;
  bool reload_requested_ ABSL_GUARDED_BY(wake_mutex_) = false;
  std::thread thread_;
};

}  // namespace weightpath::server
