// Time as the agent and the server see it: the one seam every reading of the
// clock goes through, injected so tests drive retry schedules, budgets,
// refresh intervals and rollout bake times with a fake clock instead of
// sleeping.
//
// Two readings, for two different questions:
//  - MonotonicNow() measures intervals: the boot budget, per-call timeouts,
//    retry waits, download limits, how long since the server last counted.
//    It never jumps. A board without a battery-backed clock boots with a
//    wrong date and NTP steps it by months in the middle of a boot; measured
//    on the wall clock, such a step would spend the whole budget at once or
//    stretch it by a year.
//  - Now() is the wall clock, only for timestamps that leave the process or
//    outlive it (a report's observed_at, a device's last_seen, when a stamp
//    was written). Whatever reads them back must tolerate a wall clock that
//    went backwards.
#pragma once

#include "absl/time/time.h"

namespace weightpath {

// A reading of the monotonic clock: only differences between two readings
// mean anything. Its own type so that it cannot be compared with, or passed
// where the code expects, a wall-clock absl::Time.
class MonotonicTime {
 public:
  constexpr MonotonicTime() = default;
  // `since_origin`: time since the clock's arbitrary origin (for a system
  // clock, the boot of the machine).
  static constexpr MonotonicTime FromSinceOrigin(absl::Duration since_origin) {
    return MonotonicTime(since_origin);
  }
  constexpr absl::Duration SinceOrigin() const { return since_origin_; }

  MonotonicTime& operator+=(absl::Duration d) {
    since_origin_ += d;
    return *this;
  }
  friend MonotonicTime operator+(MonotonicTime t, absl::Duration d) { return t += d; }
  friend MonotonicTime operator-(MonotonicTime t, absl::Duration d) {
    return MonotonicTime(t.since_origin_ - d);
  }
  friend absl::Duration operator-(MonotonicTime a, MonotonicTime b) {
    return a.since_origin_ - b.since_origin_;
  }
  friend bool operator==(MonotonicTime a, MonotonicTime b) {
    return a.since_origin_ == b.since_origin_;
  }
  friend bool operator!=(MonotonicTime a, MonotonicTime b) { return !(a == b); }
  friend bool operator<(MonotonicTime a, MonotonicTime b) {
    return a.since_origin_ < b.since_origin_;
  }
  friend bool operator<=(MonotonicTime a, MonotonicTime b) { return !(b < a); }
  friend bool operator>(MonotonicTime a, MonotonicTime b) { return b < a; }
  friend bool operator>=(MonotonicTime a, MonotonicTime b) { return !(a < b); }

 private:
  constexpr explicit MonotonicTime(absl::Duration since_origin) : since_origin_(since_origin) {}
  absl::Duration since_origin_;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // The wall clock: for timestamps only, never for measuring an interval.
  virtual absl::Time Now() = 0;
  // The monotonic clock: for every interval, deadline and budget.
  virtual MonotonicTime MonotonicNow() = 0;
  // Waits `duration` of monotonic time.
  virtual void SleepFor(absl::Duration duration) = 0;
};

// The machine's clocks: CLOCK_REALTIME, CLOCK_MONOTONIC and a real sleep.
class SystemClock : public Clock {
 public:
  absl::Time Now() override;
  MonotonicTime MonotonicNow() override;
  void SleepFor(absl::Duration duration) override;
};

// One SystemClock for the whole process (it has no state).
Clock* SystemClockInstance();

}  // namespace weightpath
