#include "server/fleet/store_executor.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace weightpath::server {

StoreExecutor::StoreExecutor(Options options) : options_(options) {
  workers_.reserve(static_cast<size_t>(options_.threads));
  for (int i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  timer_ = std::thread([this] { TimerLoop(); });
}

StoreExecutor::~StoreExecutor() { Shutdown(); }

bool StoreExecutor::Submit(absl::Time deadline, Work run, Work expire) {
  absl::MutexLock lock(&mutex_);
  if (stopping_ || queue_.size() >= options_.max_queued) return false;
  queue_.push_back(Task{deadline, std::move(run), std::move(expire)});
  work_ready_.Signal();
  if (deadline != absl::InfiniteFuture()) queue_changed_.Signal();
  return true;
}

void StoreExecutor::Shutdown() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    work_ready_.SignalAll();
    queue_changed_.SignalAll();
  }
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  if (timer_.joinable()) timer_.join();
}

void StoreExecutor::WorkerLoop() {
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mutex_);
      while (queue_.empty() && !stopping_) work_ready_.Wait(&mutex_);
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    // The timer may not have got to it yet; started this late, its caller
    // would have no time left to hear the answer.
    if (absl::Now() >= task.deadline) {
      std::move(task.expire)();
    } else {
      std::move(task.run)();
    }
  }
}

std::vector<StoreExecutor::Task> StoreExecutor::TakeExpired(absl::Time now) {
  std::vector<Task> expired;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->deadline <= now) {
      expired.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

void StoreExecutor::TimerLoop() {
  mutex_.Lock();
  // Once stopping, the workers take what is left (expiring it as they go):
  // the server stops the pool only after gRPC has no call in flight.
  while (!stopping_) {
    std::vector<Task> expired = TakeExpired(absl::Now());
    if (!expired.empty()) {
      mutex_.Unlock();
      for (Task& task : expired) std::move(task.expire)();
      mutex_.Lock();
      continue;
    }
    absl::Time earliest = absl::InfiniteFuture();
    for (const Task& task : queue_) earliest = std::min(earliest, task.deadline);
    if (earliest == absl::InfiniteFuture()) {
      queue_changed_.Wait(&mutex_);
    } else {
      queue_changed_.WaitWithDeadline(&mutex_, earliest);
    }
  }
  mutex_.Unlock();
}

}  // namespace weightpath::server
