// Pure parser of /proc/cpuinfo text, as printed by x86 and arm64 kernels
// (mainline, Raspberry Pi and NVIDIA L4T variants).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace weightpath::probe {

// One "processor : N" stanza.
struct CpuInfoProcessor {
  uint32_t index = 0;
  std::string model_name;                 // x86 and L4T only
  std::optional<uint32_t> arm_implementer;  // "CPU implementer"
  std::optional<uint32_t> arm_part;         // "CPU part"
  std::optional<uint32_t> physical_id;      // x86 "physical id"
  std::optional<uint32_t> core_id;          // x86 "core id"
  std::vector<std::string> flags;           // x86 "flags" or ARM "Features", raw
};

struct CpuInfo {
  // "x86_64" when stanzas carry x86 "flags"/"vendor_id", "aarch64" for
  // "CPU architecture: 8", "armv7l" for 7; empty when the text does not say.
  std::string arch_hint;
  bool flags_are_arm = false;             // Features (ARM) rather than flags (x86)
  std::vector<CpuInfoProcessor> processors;
  // Machine-wide trailer lines some ARM kernels print after the stanzas.
  // "Hardware" names the SoC family the kernel was built for (a Pi 5 says
  // BCM2835), so the probe never uses it as the CPU model.
  std::string hardware;
  std::string board_model;                // "Model", printed by Raspberry Pi kernels
};

// INVALID_ARGUMENT naming the line and key when a stanza field that the
// probe relies on is malformed, or when there is no "processor" line at all.
absl::StatusOr<CpuInfo> ParseCpuInfo(absl::string_view text);

// Raw flags every processor has (a thread may run on any of them, so a flag
// only some cores show is not one a build can rely on), in first-seen order.
std::vector<std::string> CommonRawFlags(const CpuInfo& cpuinfo);

}  // namespace weightpath::probe
