#include "store/write_behind.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/thread_name.h"

namespace weightpath::store {

namespace {

size_t BucketOf(uint64_t hash) { return hash & (RecentDeviceFilter::kBuckets - 1); }
// Never 0, which marks an empty way.
uint32_t FingerprintOf(uint64_t hash) { return static_cast<uint32_t>(hash >> 32) | 1; }

}  // namespace

RecentDeviceFilter::RecentDeviceFilter()
    : buckets_(std::make_unique<Bucket[]>(kBuckets)), next_way_(std::make_unique<uint8_t[]>(kBuckets)) {}

void RecentDeviceFilter::Remember(uint64_t hash) {
  const size_t bucket = BucketOf(hash);
  const uint32_t fingerprint = FingerprintOf(hash);
  std::array<uint32_t, kWays>& ways = buckets_[bucket].fingerprints;
  // A device resolving again keeps one way, not a way per resolve.
  for (uint32_t way : ways) {
    if (way == fingerprint) return;
  }
  uint8_t& next = next_way_[bucket];
  ways[next] = fingerprint;
  next = static_cast<uint8_t>((next + 1) % kWays);
}

bool RecentDeviceFilter::MaybeContains(uint64_t hash) const {
  const uint32_t fingerprint = FingerprintOf(hash);
  for (uint32_t way : buckets_[BucketOf(hash)].fingerprints) {
    if (way == fingerprint) return true;
  }
  return false;
}

DeviceWriteBehind::DeviceWriteBehind(Sink sink, WriteBehindOptions options)
    : sink_(std::move(sink)), options_(options) {
  if (options_.start_flusher) flusher_ = std::thread([this] { FlusherLoop(); });
}

DeviceWriteBehind::~DeviceWriteBehind() { Shutdown(); }

size_t DeviceWriteBehind::QueuedBytes(const EncodedDevice& record) {
  return sizeof(EncodedDevice) + record.device_id.size() + record.hardware_class.size() +
         record.path.size() + record.cpu_model.size() + record.policy_version.size() +
         record.agent_version.size() + record.rollout_id.size() + record.assigned_key.size() +
         record.body.size() + record.profile.size();
}

bool DeviceWriteBehind::TryEnqueue(EncodedDevice record) {
  bool wake_flusher = false;
  const uint64_t hash = StableHash64(record.device_id);  // outside the lock
  const size_t bytes = QueuedBytes(record);
  {
    std::lock_guard lock(queue_mutex_);
    if (stopping_ || queue_.size() >= options_.capacity ||
        queued_bytes_ + bytes > options_.max_bytes) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    recent_.Remember(hash);
    queued_bytes_ += bytes;
    queue_.push_back(std::move(record));
    wake_flusher = queue_.size() >= options_.max_batch;
  }
  enqueued_.fetch_add(1, std::memory_order_relaxed);
  if (wake_flusher) wake_.notify_one();
  return true;
}

size_t DeviceWriteBehind::FlushOnce() {
  bool failed = false;
  return FlushBatch(&failed);
}

size_t DeviceWriteBehind::FlushBatch(bool* failed) {
  std::lock_guard flush_lock(flush_mutex_);
  std::deque<EncodedDevice> taken;
  {
    // Resolving threads wait on this lock to enqueue: take a whole queue by
    // swapping it (constant time), and move records one by one only when
    // more than a batch is waiting.
    std::lock_guard lock(queue_mutex_);
    if (queue_.size() <= options_.max_batch) {
      taken.swap(queue_);
    } else {
      for (size_t i = 0; i < options_.max_batch; ++i) {
        taken.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
  }
  if (taken.empty()) return 0;
  // Counted as taken, superseded records included: all leave the queue.
  size_t taken_bytes = 0;
  for (const EncodedDevice& record : taken) taken_bytes += QueuedBytes(record);

  // A device resolving several times within one batch needs one write: keep
  // its newest record, at the position of its first.
  std::unordered_map<std::string, size_t> position;
  std::vector<EncodedDevice> batch;
  batch.reserve(taken.size());
  for (EncodedDevice& record : taken) {
    auto [it, inserted] = position.emplace(record.device_id, batch.size());
    if (inserted) {
      batch.push_back(std::move(record));
    } else {
      batch[it->second] = std::move(record);
      coalesced_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  const absl::Status status = sink_(batch);
  // The batch is released from the byte count whatever came of it; what is
  // put back below counts again.
  const auto release_taken = [&] {
    std::lock_guard lock(queue_mutex_);
    queued_bytes_ -= std::min(queued_bytes_, taken_bytes);
  };
  if (status.ok()) {
    release_taken();
    flushed_.fetch_add(batch.size(), std::memory_order_relaxed);
    return taken.size();
  }
  *failed = true;
  failed_batches_.fetch_add(1, std::memory_order_relaxed);
  size_t put_back = 0;
  if (status.code() == absl::StatusCode::kUnavailable) {
    // The store is away, not the records wrong: back to the front, oldest
    // first, as far as there is room (newer records queued meanwhile keep
    // their place; a device's newest one still wins when both meet in a
    // batch, and the store ignores a record older than the one it holds).
    // Not once shutting down, which writes what is queued once and ends.
    release_taken();
    std::lock_guard lock(queue_mutex_);
    if (!stopping_) {
      const size_t room =
          queue_.size() < options_.capacity ? options_.capacity - queue_.size() : 0;
      put_back = std::min(room, batch.size());
      // And within the byte bound, oldest first.
      size_t bytes = 0;
      for (size_t i = 0; i < put_back; ++i) {
        const size_t record_bytes = QueuedBytes(batch[i]);
        if (queued_bytes_ + bytes + record_bytes > options_.max_bytes) {
          put_back = i;
          break;
        }
        bytes += record_bytes;
      }
      queued_bytes_ += bytes;
      queue_.insert(queue_.begin(), std::make_move_iterator(batch.begin()),
                    std::make_move_iterator(batch.begin() + static_cast<std::ptrdiff_t>(put_back)));
    }
  } else {
    release_taken();
  }
  requeued_.fetch_add(put_back, std::memory_order_relaxed);
  failed_records_.fetch_add(batch.size() - put_back, std::memory_order_relaxed);
  return taken.size();
}

absl::StatusOr<bool> DeviceWriteBehind::WriteThrough(std::string_view device_id) {
  const uint64_t hash = StableHash64(device_id);
  {
    std::lock_guard lock(queue_mutex_);
    if (!recent_.MaybeContains(hash)) return false;
  }
  // Once this is held, a batch that was being written has been written (or
  // failed), and no record can move between the queue and the store.
  std::lock_guard flush_lock(flush_mutex_);
  std::vector<EncodedDevice> newest;
  {
    // Newest first: a device reporting right after its resolve is near the
    // back. The copy is the record the next batch would write anyway, so
    // writing it twice only moves last_seen to the same value.
    std::lock_guard lock(queue_mutex_);
    for (auto it = queue_.rbegin(); it != queue_.rend(); ++it) {
      if (it->device_id == device_id) {
        newest.push_back(*it);
        break;
      }
    }
  }
  if (newest.empty()) return true;  // written by the batch we waited for, if anything
  if (absl::Status status = sink_(newest); !status.ok()) return status;
  written_through_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void DeviceWriteBehind::FlusherLoop() {
  NameThisThread("wp-registry");
  std::unique_lock lock(queue_mutex_);
  bool failed = false;
  while (!stopping_) {
    // After a refused batch the whole period, however full the queue: a
    // batch put back must not turn into a busy loop against a store that
    // is away.
    wake_.wait_for(lock, absl::ToChronoMilliseconds(options_.flush_period), [&] {
      return stopping_ || (!failed && queue_.size() >= options_.max_batch);
    });
    if (stopping_) break;
    lock.unlock();
    // Full batches back to back while the store takes them.
    failed = false;
    while (FlushBatch(&failed) == options_.max_batch && !failed) {
    }
    lock.lock();
  }
}

void DeviceWriteBehind::Shutdown() {
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  while (FlushOnce() > 0) {
  }
}

WriteBehindCounters DeviceWriteBehind::counters() const {
  WriteBehindCounters out;
  out.enqueued = enqueued_.load();
  out.dropped = dropped_.load();
  out.coalesced = coalesced_.load();
  out.flushed = flushed_.load();
  out.failed_batches = failed_batches_.load();
  out.failed_records = failed_records_.load();
  out.requeued = requeued_.load();
  out.written_through = written_through_.load();
  return out;
}

size_t DeviceWriteBehind::pending() const {
  std::lock_guard lock(queue_mutex_);
  return queue_.size();
}

}  // namespace weightpath::store
