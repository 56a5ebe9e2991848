#include "agent/probe/sysfs_text.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weightpath::probe {

std::optional<std::string> ReadTrimmed(const Filesystem& filesystem, absl::string_view path) {
  auto text = filesystem.ReadFile(path);
  if (!text.ok()) return std::nullopt;
  std::string value = std::move(*text);
  while (!value.empty() && (value.back() == '\0' || absl::ascii_isspace(value.back()))) {
    value.pop_back();
  }
  absl::StripLeadingAsciiWhitespace(&value);
  return value;
}

std::optional<uint64_t> ReadNumber(const Filesystem& filesystem, absl::string_view path) {
  auto text = ReadTrimmed(filesystem, path);
  if (!text) return std::nullopt;
  uint64_t number = 0;
  absl::string_view digits = *text;
  if (absl::StartsWith(digits, "0x")) {
    digits.remove_prefix(2);
    if (!absl::SimpleHexAtoi(digits, &number)) return std::nullopt;
    return number;
  }
  if (!absl::SimpleAtoi(digits, &number)) return std::nullopt;
  return number;
}

std::optional<std::string> BoundDriver(const Filesystem& filesystem, absl::string_view device_dir) {
  auto target = filesystem.ReadSymlink(absl::StrCat(device_dir, "/driver"));
  if (!target.ok()) return std::nullopt;
  return std::string(PathBasename(*target));
}

std::string PciVendorName(uint32_t vendor_id) {
  switch (vendor_id) {
    case 0x10de: return "nvidia";
    case 0x8086: return "intel";
    case 0x1002:
    case 0x1022: return "amd";
    case 0x17cb: return "qualcomm";
    case 0x1e60: return "hailo";
    case 0x13b5: return "arm";
    case 0x1ae0: return "google";
    default: return absl::StrFormat("0x%04x", vendor_id);
  }
}

bool IsNumberedEntry(absl::string_view name, absl::string_view prefix) {
  if (!absl::StartsWith(name, prefix) || name.size() == prefix.size()) return false;
  for (char c : name.substr(prefix.size())) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace weightpath::probe
