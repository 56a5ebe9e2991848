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
  // What Current() returns: this thread's view of the value, valid for as
  // long as the Pin lives. A Pin can be neither copied nor moved, so it
  // cannot outlive the scope that asked for it nor travel to another
  // thread; a function that needs the value takes `const T&` from it. Work
  // that outlives the call takes Share() instead.
  class Pin {
   public:
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin() {
      if (pins_ != nullptr) --*pins_;
    }
    const T& operator*() const { return *value_; }
    const T* operator->() const { return value_; }
    const T* get() const { return value_; }

    // A value that outlives every reader (a static default).
    static Pin Of(const T& forever) { return Pin(&forever, nullptr); }

   private:
    friend class Published;
    Pin(const T* value, int* pins) : value_(value), pins_(pins) {}
    explicit Pin(std::shared_ptr<const T> owned)
        : owned_(std::move(owned)), value_(owned_.get()), pins_(nullptr) {}

    std::shared_ptr<const T> owned_;  // only when the thread's copy was pinned
    const T* value_;
    int* pins_;  // the thread copy's count of live Pins, or null
  };

  explicit Published(std::shared_ptr<const T> initial = nullptr)
      : id_(next_published_id.fetch_add(1, std::memory_order_relaxed)),
        current_(std::move(initial)) {}
  Published(const Published&) = delete;
  Published& operator=(const Published&) = delete;

  Pin Current() const {
    // One copy per thread and type; several instances in one process (tests
    // run several servers) take turns, told apart by id (never reused).
    struct ThreadCopy {
      uint64_t id = 0;
      uint64_t generation = 0;
      std::shared_ptr<const T> value;
      int pins = 0;  // live Pins on `value`: while any, it is never replaced
    };
    thread_local ThreadCopy copy;
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    if (copy.id != id_ || copy.generation != generation) {
      // Another instance's value, or an older one, is still in use on this
      // thread: this reader gets a reference of its own (rare: a call that
      // reads two instances of one type, or a publish within a call).
      if (copy.pins > 0) return Pin(Share());
      absl::MutexLock lock(&mutex_);
      copy.value = current_;
      copy.id = id_;
      // Read under the lock: value and generation must belong together even
      // if a Publish slipped in after the load above.
      copy.generation = generation_.load(std::memory_order_relaxed);
    }
    ++copy.pins;
    return Pin(copy.value.get(), &copy.pins);
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
