#include "agent/probe/meminfo.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace weightpath::probe {
namespace {

absl::StatusOr<uint64_t> ParseKilobytes(absl::string_view key, absl::string_view value) {
  absl::string_view number = value;
  if (!absl::ConsumeSuffix(&number, "kB")) {
    return absl::InvalidArgumentError(
        absl::StrCat("meminfo: field '", key, "' is '", value, "', expected '<number> kB'"));
  }
  uint64_t kilobytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(number), &kilobytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("meminfo: field '", key, "' is '", value, "', expected '<number> kB'"));
  }
  // No kernel prints this much; refused rather than wrapped around 2^64
  // into a small RAM size a build would then be chosen for.
  if (kilobytes > std::numeric_limits<uint64_t>::max() / 1024) {
    return absl::InvalidArgumentError(absl::StrCat("meminfo: field '", key, "' is '", value,
                                                   "', more bytes than 64 bits hold"));
  }
  return kilobytes * 1024;
}

}  // namespace

absl::StatusOr<MemInfo> ParseMemInfo(absl::string_view text) {
  MemInfo meminfo;
  bool saw_total = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (key == "MemTotal") {
      auto bytes = ParseKilobytes(key, value);
      if (!bytes.ok()) return bytes.status();
      meminfo.total_bytes = *bytes;
      saw_total = true;
    } else if (key == "MemAvailable") {
      auto bytes = ParseKilobytes(key, value);
      if (!bytes.ok()) return bytes.status();
      meminfo.available_bytes = *bytes;
    }
  }
  if (!saw_total) return absl::InvalidArgumentError("meminfo: no 'MemTotal' line");
  return meminfo;
}

}  // namespace weightpath::probe
