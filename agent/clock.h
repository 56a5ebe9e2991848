// Time as the boot flow sees it. Injected so tests drive the retry schedule
// and the budget with a fake clock instead of sleeping.
#pragma once

#include "absl/time/time.h"

namespace weightpath::agent {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
  virtual void SleepFor(absl::Duration duration) = 0;
};

// The wall clock and a real sleep.
class SystemClock : public Clock {
 public:
  absl::Time Now() override;
  void SleepFor(absl::Duration duration) override;
};

}  // namespace weightpath::agent
