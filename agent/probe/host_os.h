// Which operating system the probed Linux kernel serves.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

namespace weightpath::probe {

// "wsl2" when /proc/version names Microsoft's kernel (any case: WSL1 printed
// "Microsoft", WSL2 prints "microsoft-standard-WSL2"), "android" when an
// Android userland marker was seen, else "linux". WSL2 wins because its
// kernel is the one that decides what the GPU and memory look like.
std::string HostOsFromKernel(absl::string_view proc_version, bool android_marker_present);

}  // namespace weightpath::probe
