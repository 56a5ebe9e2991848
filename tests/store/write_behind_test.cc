// The write-behind queue with a recording sink; flushes are driven by the
// test (no flusher thread, no sleeps) except where the thread itself is
// the subject.
#include "store/write_behind.h"

#include <atomic>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "store/time_convert.h"
#include "tests/store/store_backends.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::store {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

EncodedDevice Record(const std::string& id, const std::string& path) {
  EncodedDevice device;
  device.device_id = id;
  device.path = path;
  return device;
}

struct RecordingSink {
  std::mutex mutex;
  std::vector<std::vector<std::string>> batches;  // "id:path" per record
  absl::Status next_status = absl::OkStatus();

  DeviceWriteBehind::Sink AsSink() {
    return [this](const std::vector<EncodedDevice>& batch) {
      std::lock_guard lock(mutex);
      std::vector<std::string> names;
      for (const auto& d : batch) names.push_back(absl::StrCat(d.device_id, ":", d.path));
      batches.push_back(names);
      return next_status;
    };
  }
};

WriteBehindOptions Manual(size_t capacity, size_t max_batch) {
  WriteBehindOptions options;
  options.capacity = capacity;
  options.max_batch = max_batch;
  options.start_flusher = false;
  return options;
}

TEST(StoreWriteBehind, FullQueueDropsAndCountsWithoutWaiting) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(3, 10));
  EXPECT_TRUE(queue.TryEnqueue(Record("a", "p")));
  EXPECT_TRUE(queue.TryEnqueue(Record("b", "p")));
  EXPECT_TRUE(queue.TryEnqueue(Record("c", "p")));
  EXPECT_FALSE(queue.TryEnqueue(Record("d", "p")));
  EXPECT_FALSE(queue.TryEnqueue(Record("e", "p")));
  EXPECT_EQ(queue.counters().enqueued, 3u);
  EXPECT_EQ(queue.counters().dropped, 2u);
  EXPECT_EQ(queue.pending(), 3u);
  EXPECT_EQ(queue.FlushOnce(), 3u);
  EXPECT_TRUE(queue.TryEnqueue(Record("f", "p")));  // room again after a flush
  EXPECT_THAT(sink.batches, ElementsAre(ElementsAre("a:p", "b:p", "c:p")));
}

// A record carries the profile as the device sent it (up to 16 KiB): the
// queue is bounded in bytes too, and a batch's bytes come back once written,
// coalesced records included.
TEST(StoreWriteBehind, RecordsBeyondTheByteBoundAreDroppedAndCounted) {
  RecordingSink sink;
  WriteBehindOptions options = Manual(1000, 1000);
  EncodedDevice big = Record("a", "p");
  big.profile.assign(16 * 1024, 'x');
  const size_t one = DeviceWriteBehind::QueuedBytes(big);
  options.max_bytes = 3 * one + 1000;  // room for small records beside three big ones
  DeviceWriteBehind queue(sink.AsSink(), options);
  for (const char* id : {"a", "b", "a"}) {
    big.device_id = id;
    EXPECT_TRUE(queue.TryEnqueue(big)) << id;
  }
  big.device_id = "d";
  EXPECT_FALSE(queue.TryEnqueue(big)) << "a fourth 16 KiB record is past the bound";
  EXPECT_TRUE(queue.TryEnqueue(Record("small", "p"))) << "a small one still fits";
  EXPECT_EQ(queue.counters().dropped, 1u);
  EXPECT_EQ(queue.FlushOnce(), 4u);
  EXPECT_EQ(queue.counters().coalesced, 1u);
  // All of it released, the coalesced "a" too: three big records fit again.
  for (const char* id : {"e", "f", "g"}) {
    big.device_id = id;
    EXPECT_TRUE(queue.TryEnqueue(big)) << id;
  }

  // A refused batch goes back only as far as the bound allows.
  sink.next_status = absl::UnavailableError("store away");
  EXPECT_EQ(queue.FlushOnce(), 3u);
  EXPECT_EQ(queue.pending(), 3u);
  EXPECT_TRUE(queue.TryEnqueue(Record("tiny", "p")));
  sink.next_status = absl::OkStatus();
  EXPECT_EQ(queue.FlushOnce(), 4u);
  EXPECT_EQ(queue.counters().requeued, 3u);
}

TEST(StoreWriteBehind, RepeatedDeviceInABatchIsWrittenOnceWithItsNewestRecord) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100, 100));
  queue.TryEnqueue(Record("a", "old"));
  queue.TryEnqueue(Record("b", "p"));
  queue.TryEnqueue(Record("a", "new"));
  queue.TryEnqueue(Record("a", "newest"));
  queue.FlushOnce();
  EXPECT_THAT(sink.batches, ElementsAre(ElementsAre("a:newest", "b:p")));
  EXPECT_EQ(queue.counters().coalesced, 2u);
  EXPECT_EQ(queue.counters().flushed, 2u);
}

TEST(StoreWriteBehind, BatchesAreCappedInQueueOrder) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100, 2));
  for (const char* id : {"a", "b", "c", "d", "e"}) queue.TryEnqueue(Record(id, "p"));
  EXPECT_EQ(queue.FlushOnce(), 2u);
  EXPECT_EQ(queue.FlushOnce(), 2u);
  EXPECT_EQ(queue.FlushOnce(), 1u);
  EXPECT_EQ(queue.FlushOnce(), 0u);
  EXPECT_THAT(sink.batches, ElementsAre(ElementsAre("a:p", "b:p"), ElementsAre("c:p", "d:p"),
                                        ElementsAre("e:p")));
}

TEST(StoreWriteBehind, SinkErrorsAreCountedAndDoNotBlockLaterBatches) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100, 10));
  sink.next_status = absl::InvalidArgumentError("a record the store refuses");
  queue.TryEnqueue(Record("a", "p"));
  queue.TryEnqueue(Record("b", "p"));
  queue.FlushOnce();
  sink.next_status = absl::OkStatus();
  queue.TryEnqueue(Record("c", "p"));
  queue.FlushOnce();
  EXPECT_EQ(queue.counters().failed_batches, 1u);
  EXPECT_EQ(queue.counters().failed_records, 2u);
  EXPECT_EQ(queue.counters().requeued, 0u);
  EXPECT_EQ(queue.counters().flushed, 1u);
}

// The store away (PostgreSQL stopped, the SQLite volume full): the batch
// waits at the front of the queue and is written once the store is back, so
// a device first seen during the outage is registered after it (its reports
// were refused NOT_FOUND until its next resolve).
TEST(StoreWriteBehind, BatchRefusedAsUnavailableIsQueuedAgainAndWrittenLater) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100, 10));
  sink.next_status = absl::UnavailableError("store down");
  queue.TryEnqueue(Record("a", "old"));
  queue.TryEnqueue(Record("b", "p"));
  EXPECT_EQ(queue.FlushOnce(), 2u);
  EXPECT_EQ(queue.pending(), 2u);
  queue.TryEnqueue(Record("a", "new"));
  EXPECT_EQ(queue.FlushOnce(), 3u);  // still down; a's two records fold into one
  EXPECT_EQ(queue.pending(), 2u);
  sink.next_status = absl::OkStatus();
  queue.TryEnqueue(Record("c", "p"));
  EXPECT_EQ(queue.FlushOnce(), 3u);
  EXPECT_EQ(queue.pending(), 0u);
  EXPECT_THAT(sink.batches.back(), ElementsAre("a:new", "b:p", "c:p"));
  EXPECT_EQ(queue.counters().failed_batches, 2u);
  EXPECT_EQ(queue.counters().requeued, 4u);  // two records, twice
  EXPECT_EQ(queue.counters().failed_records, 0u);
  EXPECT_EQ(queue.counters().flushed, 3u);
  // WriteThrough finds a queued-again record too.
  sink.next_status = absl::UnavailableError("store down");
  queue.TryEnqueue(Record("d", "p"));
  queue.FlushOnce();
  sink.next_status = absl::OkStatus();
  EXPECT_THAT(queue.WriteThrough("d"), ::weightpath::testing::IsOkAndHolds(true));
  EXPECT_THAT(sink.batches.back(), ElementsAre("d:p"));
}

// Put back only as far as the capacity allows: what does not fit is lost and
// counted; nothing newer is pushed out for it.
TEST(StoreWriteBehind, RefusedBatchPutBackOnlyWithinTheCapacity) {
  std::vector<std::vector<std::string>> batches;
  DeviceWriteBehind* self = nullptr;
  DeviceWriteBehind queue(
      [&](const std::vector<EncodedDevice>& batch) {
        std::vector<std::string> names;
        for (const auto& d : batch) names.push_back(d.device_id);
        batches.push_back(names);
        if (batches.size() > 1) return absl::OkStatus();
        self->TryEnqueue(Record("d", "p"));  // a resolve while the store is tried
        return absl::UnavailableError("store down");
      },
      Manual(3, 2));
  self = &queue;
  for (const char* id : {"a", "b", "c"}) queue.TryEnqueue(Record(id, "p"));
  queue.FlushOnce();  // a, b refused; c, d queued: room for one of them
  EXPECT_EQ(queue.pending(), 3u);
  EXPECT_EQ(queue.counters().requeued, 1u);
  EXPECT_EQ(queue.counters().failed_records, 1u);
  while (queue.FlushOnce() > 0) {
  }
  EXPECT_THAT(batches, ElementsAre(ElementsAre("a", "b"), ElementsAre("a", "c"), ElementsAre("d")));
  EXPECT_EQ(queue.counters().flushed, 3u);
}

// A full batch put back would satisfy the flusher's "a batch is waiting"
// wake-up at once: against a store that is away that was a busy loop. Now
// one try per flush period (20 here in 1 s at most; a loop makes thousands).
TEST(StoreWriteBehind, FlusherRetriesARefusedFullBatchOncePerPeriod) {
  std::atomic<int> calls{0};
  WriteBehindOptions options;
  options.capacity = 100;
  options.max_batch = 2;
  options.flush_period = absl::Milliseconds(50);
  DeviceWriteBehind queue(
      [&](const std::vector<EncodedDevice>&) {
        calls.fetch_add(1);
        return absl::UnavailableError("store down");
      },
      options);
  for (const char* id : {"a", "b", "c", "d", "e", "f"}) queue.TryEnqueue(Record(id, "p"));
  absl::SleepFor(absl::Seconds(1));  // the rate over a while is the subject
  const int tried = calls.load();
  EXPECT_GE(tried, 1);
  EXPECT_LE(tried, 25);
  EXPECT_GE(queue.pending(), 4u);  // all six, less a batch being tried
  queue.Shutdown();  // tries each record once more, then ends
  EXPECT_EQ(queue.counters().failed_records, 6u);
}

// Shutdown writes what is queued once: with the store away it ends anyway,
// and counts the records lost.
TEST(StoreWriteBehind, ShutdownWithTheStoreAwayEndsAndCountsTheLoss) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100, 2));
  sink.next_status = absl::UnavailableError("store down");
  for (const char* id : {"a", "b", "c"}) queue.TryEnqueue(Record(id, "p"));
  queue.Shutdown();
  EXPECT_EQ(queue.pending(), 0u);
  EXPECT_EQ(queue.counters().failed_records, 3u);
  EXPECT_EQ(queue.counters().requeued, 0u);
}

TEST(StoreWriteBehind, ShutdownFlushesEverythingQueuedAndRefusesMore) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100, 2));
  for (const char* id : {"a", "b", "c"}) queue.TryEnqueue(Record(id, "p"));
  queue.Shutdown();
  EXPECT_THAT(sink.batches, ElementsAre(ElementsAre("a:p", "b:p"), ElementsAre("c:p")));
  EXPECT_FALSE(queue.TryEnqueue(Record("d", "p")));
  EXPECT_EQ(queue.counters().dropped, 1u);
}

TEST(StoreWriteBehind, FlusherThreadDrainsOnShutdown) {
  RecordingSink sink;
  WriteBehindOptions options;
  options.capacity = 10000;
  options.max_batch = 64;
  options.flush_period = absl::Hours(1);  // only full batches and shutdown trigger writes
  DeviceWriteBehind queue(sink.AsSink(), options);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(queue.TryEnqueue(Record(absl::StrCat("d", i), "p")));
  queue.Shutdown();
  size_t written = 0;
  for (const auto& batch : sink.batches) {
    EXPECT_LE(batch.size(), 64u);
    written += batch.size();
  }
  EXPECT_EQ(written, 1000u);
  EXPECT_EQ(queue.counters().flushed, 1000u);
  EXPECT_EQ(queue.pending(), 0u);
}

TEST(StoreWriteBehind, WriteThroughWritesTheNewestQueuedRecordOfThatDeviceOnly) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100, 10));
  queue.TryEnqueue(Record("a", "old"));
  queue.TryEnqueue(Record("b", "p"));
  queue.TryEnqueue(Record("a", "new"));
  EXPECT_THAT(queue.WriteThrough("a"), ::weightpath::testing::IsOkAndHolds(true));
  EXPECT_THAT(sink.batches, ElementsAre(ElementsAre("a:new")));
  EXPECT_EQ(queue.counters().written_through, 1u);
  // The queue is left as it was: the next batch writes it all (again for a,
  // which the store takes as the same sighting).
  EXPECT_EQ(queue.pending(), 3u);
  // A device never enqueued costs no scan and writes nothing.
  EXPECT_THAT(queue.WriteThrough("never-resolved"), ::weightpath::testing::IsOkAndHolds(false));
  EXPECT_THAT(sink.batches, SizeIs(1));
}

TEST(StoreWriteBehind, WriteThroughAfterItsBatchWasWrittenFindsNothingLeftToWrite) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100, 10));
  queue.TryEnqueue(Record("a", "p"));
  queue.FlushOnce();
  // Still recent, no longer queued: the store has it, look there again.
  EXPECT_THAT(queue.WriteThrough("a"), ::weightpath::testing::IsOkAndHolds(true));
  EXPECT_THAT(sink.batches, SizeIs(1));
  EXPECT_EQ(queue.counters().written_through, 0u);
}

TEST(StoreWriteBehind, WriteThroughReturnsTheSinksError) {
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100, 10));
  queue.TryEnqueue(Record("a", "p"));
  sink.next_status = absl::UnavailableError("store down");
  EXPECT_THAT(queue.WriteThrough("a"),
              ::weightpath::testing::StatusIs(absl::StatusCode::kUnavailable));
}

TEST(StoreWriteBehind, RecentDevicesOutlastAFlushPeriodOfManyOthers) {
  // 50,000 other devices after "first" (a full default queue) still leave it
  // recognised: its bucket sees ~3 of them, far from 16.
  RecordingSink sink;
  DeviceWriteBehind queue(sink.AsSink(), Manual(100000, 100000));
  queue.TryEnqueue(Record("first", "p"));
  for (int i = 0; i < 50000; ++i) queue.TryEnqueue(Record(absl::StrCat("device-", i), "p"));
  EXPECT_THAT(queue.WriteThrough("first"), ::weightpath::testing::IsOkAndHolds(true));
  EXPECT_THAT(sink.batches, ElementsAre(ElementsAre("first:p")));
  int unknown_found = 0;
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<bool> found = queue.WriteThrough(absl::StrCat("stranger-", i));
    if (found.ok() && *found) ++unknown_found;
  }
  EXPECT_LE(unknown_found, 1) << "fingerprint false positives";
}

TEST(StoreWriteBehind, FlushesIntoARealRegistryKeepingEachDevicesNewestRecord) {
  auto url = testing::FreshDatabaseUrl(testing::Backend::kSqlite);
  ASSERT_THAT(url, ::weightpath::testing::IsOk());
  auto store = OpenFleetStore(*url);
  ASSERT_THAT(store, ::weightpath::testing::IsOk());
  WriteBehindOptions options;
  options.max_batch = 128;
  options.flush_period = absl::Hours(1);
  DeviceWriteBehind queue(
      [&](const std::vector<EncodedDevice>& batch) { return (*store)->UpsertEncodedDevices(batch); },
      options);
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(queue.TryEnqueue(
        EncodeDevice(testing::MakeDevice(absl::StrCat("d", i), "x86_cpu", "w4a8-amx", "Xeon", t0))));
  }
  for (int i = 0; i < 200; ++i) {  // these devices resolved again, onto another path
    ASSERT_TRUE(queue.TryEnqueue(EncodeDevice(testing::MakeDevice(
        absl::StrCat("d", i), "x86_cpu", "w4a16-tinygemm", "Xeon", t0 + absl::Minutes(1)))));
  }
  queue.Shutdown();
  EXPECT_EQ(queue.counters().failed_batches, 0u);
  auto summary = (*store)->DevicesSeenByClassAndPath(absl::InfinitePast());
  ASSERT_THAT(summary, ::weightpath::testing::IsOk());
  EXPECT_EQ((summary->at({"x86_cpu", "w4a16-tinygemm"})), 200u);
  EXPECT_EQ((summary->at({"x86_cpu", "w4a8-amx"})), 800u);
  auto repeated = (*store)->GetDevice("d7");
  ASSERT_THAT(repeated, ::weightpath::testing::IsOk());
  EXPECT_EQ(FromProtoTime(repeated->first_seen()), t0);
  EXPECT_EQ(FromProtoTime(repeated->last_seen()), t0 + absl::Minutes(1));
}

}  // namespace
}  // namespace weightpath::store
