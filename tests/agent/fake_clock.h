// A clock that only moves when told to, recording every sleep: the retry
// schedule becomes a list of exact values with no real waiting.
//
// Its wall clock and its monotonic clock move together on SleepFor and
// Advance; StepWallClock moves the wall clock alone, as NTP stepping the
// date of a board that booted without a real-time clock does. With
// TickOnEveryReading, each monotonic reading first moves both by the tick:
// code that polls the clock in a loop (a copy checking its time limit)
// sees time pass without the test reaching into the loop.
#pragma once

#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"

namespace weightpath::agent::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000))
      : wall_(start), monotonic_(MonotonicTime::FromSinceOrigin(absl::Hours(1))) {}
  absl::Time Now() override { return wall_; }
  MonotonicTime MonotonicNow() override {
    Advance(tick_);
    return monotonic_;
  }
  void SleepFor(absl::Duration duration) override {
    sleeps_.push_back(duration);
    Advance(duration);
  }
  void Advance(absl::Duration duration) {
    wall_ += duration;
    monotonic_ += duration;
  }
  void StepWallClock(absl::Duration step) { wall_ += step; }
  void TickOnEveryReading(absl::Duration tick) { tick_ = tick; }
  const std::vector<absl::Duration>& sleeps() const { return sleeps_; }

 private:
  absl::Time wall_;
  MonotonicTime monotonic_;
  absl::Duration tick_ = absl::ZeroDuration();
  std::vector<absl::Duration> sleeps_;
};

}  // namespace weightpath::agent::testing
