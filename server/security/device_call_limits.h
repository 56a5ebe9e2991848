// Overload guards in front of the device RPCs (ResolveWeightPath,
// ReportMeasurement, ReportOutcome), checked once the request is parsed and
// before any of its work:
//
//   * a global in-flight limit: at most `max_inflight` device calls are
//     being served at once (a resolve from admission to its answer, a report
//     until its store work has answered), so a flood queues in gRPC instead
//     of in the server's memory and store;
//   * a per-device rate limit: a token bucket per device id (`rate_per_second`
//     refill, `burst` deep), so one device in a retry loop cannot take the
//     capacity meant for the fleet.
//
// A refused call is RESOURCE_EXHAUSTED naming the limit, with a retry
// pushback (common/retry_pushback.h) that the server sends as the
// grpc-retry-pushback-ms trailer: for the rate limit exactly when the
// device's next token is due, for the in-flight limit a short jittered wait.
//
// The resolve hot path pays for this (bench_server_hot_path,
// BM_DeviceCallLimits_*), so it is kept small: one hash of the device id,
// one uncontended spin lock of one of 64 shards, a probe of 4 entries in one
// cache line, two atomic adds. Memory is fixed at start: `tracked_devices` entries of 16
// bytes. Only devices that spent tokens within the last burst/rate seconds
// need an entry (a full bucket is the same as none), so when more than that
// are throttled at once the entry closest to full is dropped, which can only
// forgive that device a little, never throttle an innocent one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weightpath::server {

struct DeviceCallLimitOptions {
  double rate_per_second = 0;  // per device; 0: no per-device limit
  double burst = 0;            // calls back to back before the rate applies; 0: max(1, rate)
  int64_t max_inflight = 0;    // device calls served at once; 0: no limit
  size_t tracked_devices = size_t{1} << 16;  // rate-limit entries (16 bytes each)
};

// The readings Admit takes.
inline int64_t SteadyNanos(std::chrono::steady_clock::time_point time) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

// Which limit refused a call (for weightpath_device_calls_shed_total).
enum class ShedReason { kNone, kDeviceRate, kInflight };

class DeviceCallLimits {
 public:
  explicit DeviceCallLimits(DeviceCallLimitOptions options);
  DeviceCallLimits(const DeviceCallLimits&) = delete;
  DeviceCallLimits& operator=(const DeviceCallLimits&) = delete;

  // Holds a call's in-flight place until destroyed (or moved from).
  class Admission {
   public:
    Admission() = default;
    Admission(Admission&& other) noexcept : inflight_(other.inflight_) { other.inflight_ = nullptr; }
    Admission& operator=(Admission&& other) noexcept;
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;
    ~Admission() { Release(); }

   private:
    friend class DeviceCallLimits;
    explicit Admission(std::atomic<int64_t>* inflight) : inflight_(inflight) {}
    void Release();
    std::atomic<int64_t>* inflight_ = nullptr;
  };

  // `now_ns`: a steady-clock reading. OK: serve the call while the
  // Admission lives. Otherwise RESOURCE_EXHAUSTED naming the limit, with a
  // retry pushback, and `*reason` (when given) says which limit.
  absl::StatusOr<Admission> Admit(absl::string_view device_id, int64_t now_ns,
                                  ShedReason* reason = nullptr);

  bool enabled() const { return rate_enabled_ || options_.max_inflight > 0; }
  int64_t inflight() const { return inflight_.load(std::memory_order_relaxed); }
  const DeviceCallLimitOptions& options() const { return options_; }

 private:
  struct Entry {
    uint64_t key = 0;    // hash of the device id, never 0; 0 marks a free entry
    int64_t due_ns = 0;  // GCRA's theoretical arrival time: the bucket is full once now >= it
  };
  // The entries one device id may live in: one cache line, so a lookup in a
  // table far larger than the CPU's caches misses once.
  static constexpr size_t kWays = 4;
  struct alignas(64) Window {
    Entry entries[kWays];
  };
  // The critical section is a few loads and stores: a test-and-set lock
  // costs one atomic exchange where a mutex costs two compare-and-swaps.
  class SpinLock {
   public:
    void Lock();
    void Unlock() { locked_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> locked_{false};
  };
  struct alignas(64) Shard {
    SpinLock lock;
    std::unique_ptr<Window[]> windows;
  };

  // 0 when admitted (and charged); else how long until the device's next
  // call would be.
  int64_t ChargeDevice(uint64_t key, int64_t now_ns);

  const DeviceCallLimitOptions options_;
  const bool rate_enabled_;
  const int64_t interval_ns_;   // one token
  const double burst_;
  const int64_t tolerance_ns_;  // (burst - 1) tokens of credit
  size_t windows_per_shard_ = 0;
  std::unique_ptr<Shard[]> shards_;
  alignas(64) std::atomic<int64_t> inflight_{0};
};

}  // namespace weightpath::server
