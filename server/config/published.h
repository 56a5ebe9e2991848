// An immutable value that a writer replaces now and then and many threads
// read on every request (the policy snapshot, the fleet's verification
// evidence). Each thread keeps its own reference plus the generation it
// belongs to, so the steady-state read is one atomic load: no lock, and no
// reference-count traffic on a cache line shared between cores. Readers see
// the old value or the new one, never a mix.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace weightpath::server {

inline std::atomic<uint64_t> next_published_id{1};

template <typename T>
class Published {
 public:
  explicit Published(std::shared_ptr<const T> initial = nullptr)
      : id_(next_published_id.fetch_add(1, std::memory_order_relaxed)),
        current_(std::move(initial)) {}
  Published(const Published&) = delete;
  Published& operator=(const Published&) = delete;

  // Valid until the same thread calls Current() again on any Published<T>.
  const T& Current() const {
    // One slot per thread and type; several instances in one process (tests
    // run several servers) take turns, told apart by id (never reused).
    struct ThreadCopy {
      uint64_t id = 0;
      uint64_t generation = 0;
      std::shared_ptr<const T> value;
    };
    thread_local ThreadCopy copy;
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    if (copy.id != id_ || copy.generation != generation) {
      absl::MutexLock lock(&mutex_);
      copy.value = current_;
      copy.id = id_;
      // Read under the lock: value and generation must belong together even
      // if a Publish slipped in after the load above.
      copy.generation = generation_.load(std::memory_order_relaxed);
    }
    return *copy.value;
  }

  // A reference the caller owns, for work that outlives one request.
  std::shared_ptr<const T> Share() const {
    absl::MutexLock lock(&mutex_);
    return current_;
  }

  void Publish(std::shared_ptr<const T> next) {
    std::shared_ptr<const T> previous;
    {
      absl::MutexLock lock(&mutex_);
      previous = std::exchange(current_, std::move(next));
      generation_.fetch_add(1, std::memory_order_release);
    }
    // `previous` is released here, outside the lock; threads still holding
    // it let go at their next Current().
  }

  // Publishes change(current) when it returns a value, all under the lock,
  // so a concurrent Publish is never overwritten by an older copy.
  template <typename Change>
  void Update(Change change) {
    std::shared_ptr<const T> previous;
    {
      absl::MutexLock lock(&mutex_);
      std::shared_ptr<const T> next = change(current_);
      if (next == nullptr) return;
      previous = std::exchange(current_, std::move(next));
      generation_.fetch_add(1, std::memory_order_release);
    }
  }

 private:
  const uint64_t id_;
  std::atomic<uint64_t> generation_{1};
  mutable absl::Mutex mutex_;
  std::shared_ptr<const T> current_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace weightpath::server
