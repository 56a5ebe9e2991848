// Pure parser of /proc/meminfo.
#pragma once

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace weightpath::probe {

struct MemInfo {
  uint64_t total_bytes = 0;
  // MemAvailable appeared in Linux 3.14; older kernels leave it out.
  std::optional<uint64_t> available_bytes;
};

// The kernel prints kB (meaning KiB); values are returned in bytes.
// INVALID_ARGUMENT naming the field when MemTotal is missing or a value is
// not "<number> kB".
absl::StatusOr<MemInfo> ParseMemInfo(absl::string_view text);

}  // namespace weightpath::probe
