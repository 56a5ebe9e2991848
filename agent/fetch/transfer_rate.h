// One cap on the bytes per second of every transfer of the agent together
// (config max_download_rate), so a device on a metered or shared link takes
// no more than its share however many files download in parallel. A cap per
// transfer would let N parallel downloads take N times the rate.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace weightpath::agent {

class TransferRate {
 public:
  // 0: no cap (Take never waits).
  explicit TransferRate(uint64_t bytes_per_second);

  // Accounts `bytes` just received and, once the transfers together are
  // ahead of the rate, sleeps until they are not (but never past `until`:
  // the transfer's own time limit then ends it). Thread-safe: every
  // transfer shares one schedule, a virtual clock of when the bytes taken
  // so far may have arrived at the rate (GCRA), with a burst of 50 ms.
  void Take(uint64_t bytes, std::chrono::steady_clock::time_point until);

  uint64_t bytes_per_second() const { return bytes_per_second_; }

 private:
  const uint64_t bytes_per_second_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point schedule_{};
};

}  // namespace weightpath::agent
