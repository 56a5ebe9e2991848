// NVIDIA Tegra (Jetson) detection. NVML does not run on Jetson and its GPU
// has no PCI identity, so the SoC's own markers are the evidence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "agent/probe/filesystem.h"

namespace weightpath::probe {

struct TegraSoc {
  std::string soc;       // e.g. "tegra234" from the device tree; may be empty
  std::string evidence;  // the file that showed it
};

// /etc/nv_tegra_release (written by NVIDIA's L4T), or a "tegra" entry in
// /proc/device-tree/compatible (NUL-separated strings such as
// "nvidia,tegra234"). Either one is enough.
std::optional<TegraSoc> DetectTegra(const Filesystem& filesystem);

// The L4T release in /etc/nv_tegra_release's first line, as jetson-containers
// reads it: "# R36 (release), REVISION: 4.3, ..." -> {36, "36.4.3"}.
struct L4tRelease {
  uint32_t major = 0;
  std::string text;
};
std::optional<L4tRelease> ParseL4tRelease(absl::string_view release_file);

}  // namespace weightpath::probe
