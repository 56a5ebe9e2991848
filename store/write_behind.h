// The bounded queue between ResolveWeightPath and the device registry: the
// resolve path only appends to memory, a flusher thread writes batches.
// Registry freshness is soft state, so when the queue is full a record is
// dropped and counted rather than making a device wait on the disk.
//
// A batch the store refuses as UNAVAILABLE (the database away, its volume
// full, a lock held past the deadline) goes back to the front of the queue,
// as far as the capacity allows, and is written once the store answers
// again: a device first seen during an outage would otherwise stay unknown
// until its next resolve, and its reports be refused NOT_FOUND meanwhile.
// Any other error (the records themselves refused) loses the batch.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/encoded_device.h"

namespace weightpath::store {

struct WriteBehindOptions {
  size_t capacity = 50000;   // records waiting; beyond this TryEnqueue drops
  // Their bytes (QueuedBytes) waiting, likewise: a record carries the
  // device's profile as sent (up to 16 KiB), so 50,000 records of hostile
  // 16 KiB profiles would hold ~800 MiB where ordinary ones (~2 KiB) hold
  // ~100 MiB. A batch being written counts until it is written.
  size_t max_bytes = size_t{256} << 20;
  // Records per sink call. Large batches pay off on a big registry: a
  // million devices' sightings span ~15k pages, and a transaction writes each
  // page it dirties once however many of its rows changed. The cost is the
  // store's write lock held longer (SQLite: about 0.25 s for 10k records on
  // the reference machine, which a measurement report may wait out).
  size_t max_batch = 10000;
  absl::Duration flush_period = absl::Seconds(1);
  // false: no thread; the owner calls FlushOnce() (tests drive flushes this way).
  bool start_flusher = true;
};

struct WriteBehindCounters {
  uint64_t enqueued = 0;
  uint64_t dropped = 0;         // queue full (records or bytes), or enqueued after Shutdown
  uint64_t coalesced = 0;       // superseded by a newer record of the same device in a batch
  uint64_t flushed = 0;         // records the sink accepted
  uint64_t failed_batches = 0;  // sink errors, each batch as often as it failed
  uint64_t failed_records = 0;  // records lost to them: not put back (no room,
                                // shutting down, not UNAVAILABLE)
  uint64_t requeued = 0;        // records of failed batches put back for a retry
  uint64_t written_through = 0;  // records written ahead of their batch by WriteThrough
};

// Which devices were queued lately: a fingerprint filter of kBuckets x
// kWays devices, each bucket first in first out, so a device stays in it
// until kWays later devices hashed to its bucket (about 6 s at 40,000
// distinct devices a second, far longer than a record waits to be written).
// False positives (two devices with one fingerprint in one bucket) are
// about 1 in 2^27. Not thread-safe: DeviceWriteBehind holds its queue's lock.
class RecentDeviceFilter {
 public:
  static constexpr size_t kBuckets = 16384;
  static constexpr size_t kWays = 16;  // 16 x 4 bytes: one cache line per bucket

  RecentDeviceFilter();
  // `hash`: StableHash64 of the device id.
  void Remember(uint64_t hash);
  bool MaybeContains(uint64_t hash) const;

 private:
  struct alignas(64) Bucket {
    std::array<uint32_t, kWays> fingerprints{};  // 0: empty
  };
  const std::unique_ptr<Bucket[]> buckets_;
  const std::unique_ptr<uint8_t[]> next_way_;  // per bucket: the way to overwrite next
};

class DeviceWriteBehind {
 public:
  // Usually [&](const auto& batch) { return store->UpsertEncodedDevices(batch); }.
  using Sink = std::function<absl::Status(const std::vector<EncodedDevice>&)>;

  DeviceWriteBehind(Sink sink, WriteBehindOptions options);
  ~DeviceWriteBehind();  // Shutdown()
  DeviceWriteBehind(const DeviceWriteBehind&) = delete;
  DeviceWriteBehind& operator=(const DeviceWriteBehind&) = delete;

  // Never waits on the sink: a short critical section on the queue only.
  // false when the record was dropped.
  bool TryEnqueue(EncodedDevice record);

  // What a record costs the queue: its strings and the struct.
  static size_t QueuedBytes(const EncodedDevice& record);

  // Writes one batch (up to max_batch records, the oldest first) in the
  // calling thread; returns how many queued records it took (a batch put
  // back after an UNAVAILABLE counts too: it was taken, and is queued again).
  size_t FlushOnce();

  // For a report that found no registered device: if `device_id` was
  // enqueued lately (its resolve answered, its record not yet written),
  // writes its newest queued record now, in the calling thread, after any
  // batch being written; true then (look in the store again). false at once
  // when the device was not enqueued lately, so a report from a device that
  // never resolved costs no queue scan. An error is the sink's.
  //
  // "Lately" is RecentDeviceFilter's; a false positive only costs a scan of
  // the queue.
  absl::StatusOr<bool> WriteThrough(std::string_view device_id);

  // Stops accepting, writes everything still queued, stops the flusher.
  void Shutdown();

  WriteBehindCounters counters() const;
  size_t pending() const;

 private:
  void FlusherLoop();
  // FlushOnce, saying whether the sink failed.
  size_t FlushBatch(bool* failed);

  const Sink sink_;
  const WriteBehindOptions options_;

  mutable std::mutex queue_mutex_;
  std::condition_variable wake_;
  std::deque<EncodedDevice> queue_;
  // QueuedBytes of queue_ and of the batch being written.
  size_t queued_bytes_ = 0;
  bool stopping_ = false;

  std::mutex flush_mutex_;  // one batch at a time, in queue order
  std::thread flusher_;

  RecentDeviceFilter recent_;  // under queue_mutex_

  std::atomic<uint64_t> enqueued_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> coalesced_{0};
  std::atomic<uint64_t> flushed_{0};
  std::atomic<uint64_t> failed_batches_{0};
  std::atomic<uint64_t> failed_records_{0};
  std::atomic<uint64_t> requeued_{0};
  std::atomic<uint64_t> written_through_{0};
};

}  // namespace weightpath::store
