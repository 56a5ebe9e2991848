// Human-readable rendering of a hardware profile for `weightpath-agent probe`.
#pragma once

#include <string>

#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::probe {

// The profile's fields, its hardware class (or why it has none), one line
// per accelerator with its usability and reason, then the probe notes.
std::string ProfileText(const v1::HardwareProfile& profile);

}  // namespace weightpath::probe
