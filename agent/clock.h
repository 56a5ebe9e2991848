// The agent's code and its tests name the process clock (common/clock.h) in
// the agent's own namespace.
#pragma once

#include "common/clock.h"

namespace weightpath::agent {

using ::weightpath::Clock;
using ::weightpath::MonotonicTime;
using ::weightpath::SystemClock;
using ::weightpath::SystemClockInstance;

}  // namespace weightpath::agent
