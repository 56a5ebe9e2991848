#include "agent/probe/host_os.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace weightpath::probe {

std::string HostOsFromKernel(absl::string_view proc_version, bool android_marker_present) {
  if (absl::StrContains(absl::AsciiStrToLower(proc_version), "microsoft")) return "wsl2";
  if (android_marker_present) return "android";
  return "linux";
}

}  // namespace weightpath::probe
