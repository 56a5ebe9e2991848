#include "agent/fetch/transfer_rate.h"

#include <algorithm>
#include <thread>

namespace weightpath::agent {

namespace {
// Bytes within this much of the rate pass without a wait: a sleep per
// 16 KiB callback would cost more than it shapes.
constexpr std::chrono::milliseconds kBurst{50};
}  // namespace

TransferRate::TransferRate(uint64_t bytes_per_second) : bytes_per_second_(bytes_per_second) {}

void TransferRate::Take(uint64_t bytes, std::chrono::steady_clock::time_point until) {
  if (bytes_per_second_ == 0 || bytes == 0) return;
  const auto now = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point wake;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    // An idle link does not bank more than the burst.
    schedule_ = std::max(schedule_, now - kBurst);
    schedule_ += std::chrono::nanoseconds(
        static_cast<int64_t>(static_cast<double>(bytes) * 1e9 /
                             static_cast<double>(bytes_per_second_)));
    wake = schedule_ - kBurst;
  }
  if (wake > now) std::this_thread::sleep_until(std::min(wake, until));
}

}  // namespace weightpath::agent
