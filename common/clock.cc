#include "common/clock.h"

#include <time.h>

#include "absl/time/clock.h"

namespace weightpath {

absl::Time SystemClock::Now() { return absl::Now(); }

MonotonicTime SystemClock::MonotonicNow() {
  // CLOCK_MONOTONIC, as libcurl's timeouts and nanosleep use: an interval
  // measured here and one enforced there agree.
  struct timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return MonotonicTime::FromSinceOrigin(absl::DurationFromTimespec(now));
}

// absl::SleepFor sleeps with nanosleep(), a relative wait the kernel measures
// on CLOCK_MONOTONIC: a wall-clock step neither shortens nor stretches it.
void SystemClock::SleepFor(absl::Duration duration) { absl::SleepFor(duration); }

Clock* SystemClockInstance() {
  static SystemClock* const clock = new SystemClock();
  return clock;
}

}  // namespace weightpath
