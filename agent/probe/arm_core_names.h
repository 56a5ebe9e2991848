// Names of ARM cores from the MIDR fields /proc/cpuinfo prints ("CPU
// implementer", "CPU part"). Mainline arm64 kernels print no "model name",
// and a Raspberry Pi's "Hardware" line names the wrong SoC, so these two
// numbers are the reliable way to say which core a device has.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"

namespace weightpath::probe {

// e.g. (0x41, 0xd40) -> "Neoverse-V1"; nullopt for a pair not in the table.
std::optional<absl::string_view> ArmCoreName(uint32_t implementer, uint32_t part);

// The name, or "ARM implementer 0x.. part 0x..." for an unknown pair, so the
// profile still identifies the core exactly.
std::string ArmCoreNameOrIds(uint32_t implementer, uint32_t part);

}  // namespace weightpath::probe
