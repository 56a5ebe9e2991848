#include "server/security/device_call_limits.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/retry_pushback.h"

namespace weightpath::server {
namespace {

constexpr int kShardBits = 6;  // 64 shards: two cores and a few dozen threads rarely meet
constexpr size_t kShards = size_t{1} << kShardBits;

// The in-flight refusal's pushback: spread over this range by arrival time,
// so callers refused together do not come back together.
constexpr int64_t kInflightPushbackMinMs = 100;
constexpr int64_t kInflightPushbackSpreadMs = 200;

size_t RoundUpToPowerOfTwo(size_t n) {
  size_t power = 1;
  while (power < n) power <<= 1;
  return power;
}

int64_t CeilMilliseconds(int64_t ns) { return std::max<int64_t>(1, (ns + 999'999) / 1'000'000); }

// At least one call always goes through; unset means a second's worth.
double EffectiveBurst(const DeviceCallLimitOptions& options) {
  return std::max(1.0, options.burst > 0 ? options.burst : options.rate_per_second);
}

}  // namespace

DeviceCallLimits::Admission& DeviceCallLimits::Admission::operator=(Admission&& other) noexcept {
  if (this != &other) {
    Release();
    inflight_ = std::exchange(other.inflight_, nullptr);
  }
  return *this;
}

void DeviceCallLimits::Admission::Release() {
  if (inflight_ != nullptr) inflight_->fetch_sub(1, std::memory_order_acq_rel);
  inflight_ = nullptr;
}

void DeviceCallLimits::SpinLock::Lock() {
  for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
    // Wait reading, not writing, so the holder's cache line stays put; a
    // holder that was descheduled gets the CPU back.
    while (locked_.load(std::memory_order_relaxed)) {
      if (++spins > 64) std::this_thread::yield();
    }
  }
}

DeviceCallLimits::DeviceCallLimits(DeviceCallLimitOptions options)
    : options_(options),
      rate_enabled_(options.rate_per_second > 0),
      interval_ns_(rate_enabled_ ? static_cast<int64_t>(std::ceil(1e9 / options.rate_per_second))
                                 : 0),
      burst_(EffectiveBurst(options)),
      tolerance_ns_(rate_enabled_
                        ? static_cast<int64_t>((burst_ - 1.0) * static_cast<double>(interval_ns_))
                        : 0) {
  if (!rate_enabled_) return;
  windows_per_shard_ = RoundUpToPowerOfTwo(
      std::max<size_t>(1, (options_.tracked_devices + kShards * kWays - 1) / (kShards * kWays)));
  shards_ = std::make_unique<Shard[]>(kShards);
  for (size_t i = 0; i < kShards; ++i) {
    shards_[i].windows = std::make_unique<Window[]>(windows_per_shard_);
  }
}

int64_t DeviceCallLimits::ChargeDevice(uint64_t key, int64_t now_ns) {
  Shard& shard = shards_[key >> (64 - kShardBits)];
  Entry* const window = shard.windows[key & (windows_per_shard_ - 1)].entries;
  shard.lock.Lock();
  Entry* entry = nullptr;
  Entry* spare = nullptr;
  for (size_t i = 0; i < kWays; ++i) {
    if (window[i].key == key) {
      entry = &window[i];
      break;
    }
    // A free entry (due 0) or a full bucket's costs nothing to reuse; failing
    // those, the bucket nearest to full.
    if (spare == nullptr || window[i].due_ns < spare->due_ns) spare = &window[i];
  }
  if (entry == nullptr) {
    entry = spare;
    entry->key = key;
    entry->due_ns = now_ns;
  }
  // GCRA: a call is due one interval after the previous one, and may come
  // up to `tolerance` early (the burst).
  const int64_t due = std::max(entry->due_ns, now_ns);
  int64_t wait_ns = 0;
  if (due - now_ns > tolerance_ns_) {
    wait_ns = due - now_ns - tolerance_ns_;
  } else {
    entry->due_ns = due + interval_ns_;
  }
  shard.lock.Unlock();
  return wait_ns;
}

absl::StatusOr<DeviceCallLimits::Admission> DeviceCallLimits::Admit(absl::string_view device_id,
                                                                    int64_t now_ns,
                                                                    ShedReason* reason) {
  if (reason != nullptr) *reason = ShedReason::kNone;
  Admission admission;
  if (options_.max_inflight > 0) {
    const int64_t before = inflight_.fetch_add(1, std::memory_order_acq_rel);
    if (before >= options_.max_inflight) {
      inflight_.fetch_sub(1, std::memory_order_acq_rel);
      if (reason != nullptr) *reason = ShedReason::kInflight;
      const int64_t wait_ms =
          kInflightPushbackMinMs + (now_ns / 1000) % kInflightPushbackSpreadMs;
      return WithRetryPushback(
          absl::ResourceExhaustedError(absl::StrCat(
              "server busy: ", options_.max_inflight,
              " device calls are in flight (--max_inflight_device_calls); retry in ", wait_ms,
              " ms")),
          absl::Milliseconds(wait_ms));
    }
    admission = Admission(&inflight_);
  }
  if (rate_enabled_) {
    // Never 0, which marks a free entry.
    const uint64_t key = absl::Hash<absl::string_view>{}(device_id) | 1;
    if (const int64_t wait_ns = ChargeDevice(key, now_ns); wait_ns > 0) {
      if (reason != nullptr) *reason = ShedReason::kDeviceRate;
      const int64_t wait_ms = CeilMilliseconds(wait_ns);
      return WithRetryPushback(
          absl::ResourceExhaustedError(absl::StrCat(
              "device_id: this device makes more than ", options_.rate_per_second,
              " calls a second (--device_rate_limit, burst ", burst_, "); retry in ", wait_ms,
              " ms")),
          absl::Milliseconds(wait_ms));
    }
  }
  return admission;
}

}  // namespace weightpath::server
