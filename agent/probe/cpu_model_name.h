// The human name of a device's CPU, from cpuinfo plus the board name.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "agent/probe/cpuinfo.h"

namespace weightpath::probe {

// x86: the "model name" line.
// ARM: the core names from implementer/part ("Neoverse-V1"; a mix is listed
// with counts in cpuinfo order, "3x Cortex-A510 + 2x Cortex-A715 + ..."),
// prefixed by the board when one is known: `device_tree_model`
// (/proc/device-tree/model), else cpuinfo's "Model" line, giving e.g.
// "Raspberry Pi 5 Model B Rev 1.0 (Cortex-A76)". The "Hardware" line is
// never used (a Pi 5 reports BCM2835). "model name" is the last resort on
// ARM: L4T prints only "ARMv8 Processor rev 1 (v8l)" there.
std::string CpuModelName(const CpuInfo& cpuinfo, absl::string_view device_tree_model);

}  // namespace weightpath::probe
