#include "server/policy_snapshot.h"

#include <utility>

namespace weightpath::server {
namespace {

std::atomic<uint64_t> next_holder_id{1};

// One cache slot per thread; tests run several holders in one process, so
// the slot remembers which holder (by id, never reused) it came from.
struct ThreadSnapshotCache {
  uint64_t holder_id = 0;
  uint64_t generation = 0;
  std::shared_ptr<const Snapshot> snapshot;
};

thread_local ThreadSnapshotCache thread_cache;

}  // namespace

SnapshotHolder::SnapshotHolder() : SnapshotHolder(nullptr) {}

SnapshotHolder::SnapshotHolder(std::shared_ptr<const Snapshot> initial)
    : holder_id_(next_holder_id.fetch_add(1, std::memory_order_relaxed)),
      current_(std::move(initial)) {}

const Snapshot& SnapshotHolder::Current() const {
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  ThreadSnapshotCache& cache = thread_cache;
  if (cache.holder_id != holder_id_ || cache.generation != generation) {
    absl::MutexLock lock(&mutex_);
    cache.snapshot = current_;
    cache.holder_id = holder_id_;
    // Read under the lock: the pair (pointer, generation) must match even
    // if a Publish slipped in after the load above.
    cache.generation = generation_.load(std::memory_order_relaxed);
  }
  return *cache.snapshot;
}

std::shared_ptr<const Snapshot> SnapshotHolder::Share() const {
  absl::MutexLock lock(&mutex_);
  return current_;
}

void SnapshotHolder::Publish(std::shared_ptr<const Snapshot> next) {
  std::shared_ptr<const Snapshot> previous;
  {
    absl::MutexLock lock(&mutex_);
    previous = std::exchange(current_, std::move(next));
    generation_.fetch_add(1, std::memory_order_release);
  }
  // `previous` is released here, outside the lock; threads that cached it
  // drop their reference on their next request.
}

}  // namespace weightpath::server
