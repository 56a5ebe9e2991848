// Loads the policy and catalog pair, and keeps it current: polls both files
// (and reloads on request, e.g. SIGHUP), validates the new pair whole, then
// publishes it; a pair that fails validation is refused, logged, counted,
// and the last good one keeps serving.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/file_fingerprint.h"
#include "server/metrics.h"
#include "server/policy_snapshot.h"

namespace weightpath::server {

// Empty paths mean the embedded defaults (bundled policy, demo catalog).
struct ConfigSources {
  std::string policy_path;
  std::string catalog_path;
};

inline constexpr size_t kMaxConfigFileBytes = 16 * 1024 * 1024;

// Reads and validates both documents into one snapshot.
absl::StatusOr<std::shared_ptr<const Snapshot>> LoadSnapshot(const ConfigSources& sources);

class ConfigWatcher {
 public:
  enum class Result { kUnchanged, kReloaded, kRefused };

  // `metrics` may be null (tests of the reload logic alone).
  ConfigWatcher(ConfigSources sources, SnapshotHolder* holder, ServerMetrics* metrics,
                absl::Duration poll_interval);
  ~ConfigWatcher();
  ConfigWatcher(const ConfigWatcher&) = delete;
  ConfigWatcher& operator=(const ConfigWatcher&) = delete;

  // The first load, before serving: an error here means the server must not
  // start. Publishes the snapshot into the holder.
  absl::Status LoadInitial();
  // Reloads when either file's fingerprint moved since the last attempt.
  Result CheckNow();
  // Reloads regardless of fingerprints (SIGHUP).
  Result ReloadNow();

  // Polls CheckNow() every poll_interval on a thread of its own; a zero
  // interval disables polling.
  void Start();
  void Stop();

 private:
  Result Reload() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reload_mutex_);
  void PollLoop();

  const ConfigSources sources_;
  SnapshotHolder* const holder_;
  ServerMetrics* const metrics_;
  const absl::Duration poll_interval_;

  absl::Mutex reload_mutex_;
  FileFingerprint policy_fingerprint_ ABSL_GUARDED_BY(reload_mutex_);
  FileFingerprint catalog_fingerprint_ ABSL_GUARDED_BY(reload_mutex_);

  absl::Mutex stop_mutex_;
  bool stopping_ ABSL_GUARDED_BY(stop_mutex_) = false;
  std::thread poll_thread_;
};

}  // namespace weightpath::server
