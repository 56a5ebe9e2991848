// A clock that only moves when told to, recording every sleep: the retry
// schedule becomes a list of exact values with no real waiting.
#pragma once

#include <vector>

#include "absl/time/time.h"
#include "agent/clock.h"

namespace weightpath::agent::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() override { return now_; }
  void SleepFor(absl::Duration duration) override {
    sleeps_.push_back(duration);
    now_ += duration;
  }
  void Advance(absl::Duration duration) { now_ += duration; }
  const std::vector<absl::Duration>& sleeps() const { return sleeps_; }

 private:
  absl::Time now_;
  std::vector<absl::Duration> sleeps_;
};

}  // namespace weightpath::agent::testing
