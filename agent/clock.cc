#include "agent/clock.h"

#include "absl/time/clock.h"

namespace weightpath::agent {

absl::Time SystemClock::Now() { return absl::Now(); }

void SystemClock::SleepFor(absl::Duration duration) { absl::SleepFor(duration); }

}  // namespace weightpath::agent
