#include "absl/strings/str_cat.h"
#include "agent/probe/host_os.h"
#include "agent/probe/probe_steps.h"
#include "agent/probe/sysfs_text.h"

namespace weightpath::probe {
namespace {

// Entries named prefix<N> in a directory; nullopt when it cannot be listed.
std::optional<uint32_t> CountNumbered(const Filesystem& filesystem, absl::string_view dir,
                                      absl::string_view prefix) {
  auto names = filesystem.ListDirectory(dir);
  if (!names.ok()) return std::nullopt;
  uint32_t count = 0;
  for (const std::string& name : *names) count += IsNumberedEntry(name, prefix) ? 1 : 0;
  return count;
}

// Files only an Android userland has.
constexpr absl::string_view kAndroidMarkers[] = {"/system/build.prop", "/system/bin/app_process64",
                                                "/system/bin/app_process"};

}  // namespace

void ProbeSystem(const Filesystem& filesystem, v1::HardwareProfile* profile) {
  const auto numa_nodes = CountNumbered(filesystem, "/sys/devices/system/node", "node");
  if (numa_nodes && *numa_nodes > 0) {
    profile->set_numa_nodes(*numa_nodes);
  } else {
    // Kernels without NUMA support have no node directory; all memory is
    // then one node.
    profile->set_numa_nodes(1);
    profile->add_probe_notes("numa_nodes: no /sys/devices/system/node/node*; counted as 1");
  }
  profile->set_thermal_zones(
      CountNumbered(filesystem, "/sys/class/thermal", "thermal_zone").value_or(0));

  bool android = false;
  for (absl::string_view marker : kAndroidMarkers) android = android || filesystem.Exists(marker);
  auto version = filesystem.ReadFile("/proc/version");
  if (!version.ok()) {
    profile->add_probe_notes(absl::StrCat("host_os: ", version.status().message()));
  }
  profile->set_host_os(HostOsFromKernel(version.ok() ? *version : "", android));
}

}  // namespace weightpath::probe
