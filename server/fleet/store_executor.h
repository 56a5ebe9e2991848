// A bounded pool of threads for the calls whose work waits on the fleet
// store (reports, operator calls). gRPC's callback threads are few and every
// resolve shares them, so a store commit stuck behind a lock must never run
// on one: the handler queues the work here and returns, and the worker
// finishes the call.
//
// Bounded both ways: a fixed number of threads (the store admits only so
// many writers, so more would only wait longer), and a queue of fixed
// length, beyond which a call is refused at once. Each task carries its
// deadline; one still queued when that comes is expired (its `expire` runs
// instead of its work) by the pool's timer thread, so its caller hears back
// in time even while every worker is stuck.
#pragma once

#include <cstddef>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace weightpath::server {

class StoreExecutor {
 public:
  struct Options {
    int threads = 4;
    size_t max_queued = 256;  // waiting for a worker, not counting those running
  };

  using Work = absl::AnyInvocable<void() &&>;

  explicit StoreExecutor(Options options);
  ~StoreExecutor();  // Shutdown()
  StoreExecutor(const StoreExecutor&) = delete;
  StoreExecutor& operator=(const StoreExecutor&) = delete;

  // Queues `run`; `expire` runs instead (on the timer thread, so it must not
  // block) if no worker has started it by `deadline`. Exactly one of the two
  // runs, once. false: the queue is full or the pool is shut down, neither
  // will run, and the caller answers the call itself.
  bool Submit(absl::Time deadline, Work run, Work expire);

  // Refuses new work, lets queued tasks run (or expire), and joins the
  // threads. Safe to call twice.
  void Shutdown();

  int threads() const { return options_.threads; }
  size_t max_queued() const { return options_.max_queued; }

 private:
  struct Task {
    absl::Time deadline;
    Work run;
    Work expire;
  };

  void WorkerLoop();
  void TimerLoop();
  // Removes the queued tasks whose deadline is not after `now`.
  std::vector<Task> TakeExpired(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Options options_;
  absl::Mutex mutex_;
  absl::CondVar work_ready_;      // workers: a task queued, or stopping
  absl::CondVar queue_changed_;   // timer: the earliest deadline may be sooner, or stopping
  std::deque<Task> queue_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
  std::thread timer_;
};

}  // namespace weightpath::server
