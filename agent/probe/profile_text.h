// Human-readable rendering of a hardware profile for `weightpath-agent probe`.
#pragma once

#include <string>

#include "absl/status/statusor.h"

#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::probe {

// The profile's fields, its hardware class (or why it has none), one line
// per accelerator with its usability and reason, then the probe notes.
std::string ProfileText(const v1::HardwareProfile& profile);

// Protobuf JSON with the proto field names and every field printed, except
// that 64-bit counts (ram_*_bytes, gpu_mem_bytes, clusters' max_khz) are JSON
// numbers rather than proto3's quoted strings: that is how the seed's prober
// wrote them, and what policy::ParseProfileJson reads, so the output can be
// fed back through WEIGHTPATH_HW_PROFILE. INTERNAL if printing fails.
absl::StatusOr<std::string> ProfileJson(const v1::HardwareProfile& profile);

}  // namespace weightpath::probe
