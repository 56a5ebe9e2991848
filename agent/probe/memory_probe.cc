#include "absl/strings/str_cat.h"
#include "agent/probe/meminfo.h"
#include "agent/probe/probe_steps.h"

namespace weightpath::probe {

void ProbeMemory(const Filesystem& filesystem, v1::HardwareProfile* profile) {
  auto text = filesystem.ReadFile("/proc/meminfo");
  if (!text.ok()) {
    profile->add_probe_notes(absl::StrCat("memory: ", text.status().message()));
    return;
  }
  auto meminfo = ParseMemInfo(*text);
  if (!meminfo.ok()) {
    profile->add_probe_notes(absl::StrCat("memory: ", meminfo.status().message()));
    return;
  }
  profile->set_ram_total_bytes(meminfo->total_bytes);
  if (meminfo->available_bytes) {
    profile->set_ram_available_bytes(*meminfo->available_bytes);
  } else {
    profile->add_probe_notes(
        "memory: /proc/meminfo has no MemAvailable (kernel older than 3.14); "
        "ram_available_bytes left 0");
  }
}

}  // namespace weightpath::probe
