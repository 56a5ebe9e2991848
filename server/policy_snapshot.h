// The policy and the catalog a request is answered with, published as one
// immutable pair so a reload can never be observed half-done.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "policy/policy.h"
#include "server/catalog.h"

namespace weightpath::server {

struct Snapshot {
  std::shared_ptr<const policy::Policy> policy;
  std::shared_ptr<const Catalog> catalog;
};

// Readers take the current snapshot on every request; writers (the reload
// watcher) replace it rarely. Each thread keeps its own reference plus the
// generation it belongs to, so the steady-state read is one atomic load with
// no lock and no reference-count traffic shared between cores.
class SnapshotHolder {
 public:
  // Empty until the first Publish(); Current() needs one published snapshot.
  SnapshotHolder();
  explicit SnapshotHolder(std::shared_ptr<const Snapshot> initial);
  SnapshotHolder(const SnapshotHolder&) = delete;
  SnapshotHolder& operator=(const SnapshotHolder&) = delete;

  // Valid until the same thread calls Current() again on any holder.
  const Snapshot& Current() const;
  // A reference the caller owns, for work that outlives one request.
  std::shared_ptr<const Snapshot> Share() const;
  void Publish(std::shared_ptr<const Snapshot> next);

 private:
  const uint64_t holder_id_;
  std::atomic<uint64_t> generation_{1};
  mutable absl::Mutex mutex_;
  std::shared_ptr<const Snapshot> current_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace weightpath::server
