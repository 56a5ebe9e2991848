// The store executor alone: work leaves the caller's thread, the queue is
// bounded, and a task still queued at its deadline is expired on time even
// while every worker is stuck.
#include "server/fleet/store_executor.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace weightpath::server {
namespace {

StoreExecutor::Options OneThread(size_t max_queued) {
  StoreExecutor::Options options;
  options.threads = 1;
  options.max_queued = max_queued;
  return options;
}

TEST(StoreExecutorTest, RunsWorkOnItsOwnThreads) {
  StoreExecutor executor(OneThread(4));
  absl::Notification done;
  std::thread::id ran_on;
  ASSERT_TRUE(executor.Submit(
      absl::InfiniteFuture(),
      [&] {
        ran_on = std::this_thread::get_id();
        done.Notify();
      },
      [] { ADD_FAILURE() << "expired"; }));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(StoreExecutorTest, RefusesBeyondTheQueueAndExpiresQueuedWorkWhileWorkersAreStuck) {
  StoreExecutor executor(OneThread(2));
  absl::Notification release, stuck;
  ASSERT_TRUE(executor.Submit(
      absl::InfiniteFuture(),
      [&] {
        stuck.Notify();
        release.WaitForNotification();
      },
      [] {}));
  ASSERT_TRUE(stuck.WaitForNotificationWithTimeout(absl::Seconds(10)));

  std::atomic<int> ran{0};
  absl::Notification expired;
  absl::Time expired_at;
  const absl::Time soon = absl::Now() + absl::Milliseconds(100);
  ASSERT_TRUE(executor.Submit(
      soon, [&] { ran.fetch_add(1); },
      [&] {
        expired_at = absl::Now();
        expired.Notify();
      }));
  ASSERT_TRUE(executor.Submit(absl::InfiniteFuture(), [&] { ran.fetch_add(1); }, [] {}));
  EXPECT_FALSE(executor.Submit(absl::InfiniteFuture(), [&] { ran.fetch_add(100); }, [] {}))
      << "a third queued task fits a queue of two";

  ASSERT_TRUE(expired.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_GE(expired_at, soon);
  EXPECT_LT(expired_at, soon + absl::Seconds(2)) << "expired late: the worker was still stuck";
  // Its slot is free again.
  EXPECT_TRUE(executor.Submit(absl::InfiniteFuture(), [&] { ran.fetch_add(1); }, [] {}));

  release.Notify();
  executor.Shutdown();  // runs what is queued
  EXPECT_EQ(ran.load(), 2);
  EXPECT_FALSE(executor.Submit(absl::InfiniteFuture(), [] {}, [] {}));
}

}  // namespace
}  // namespace weightpath::server
