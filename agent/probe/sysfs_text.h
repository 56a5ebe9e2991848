// Small readers shared by the probe's sysfs walkers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"

#include "agent/probe/filesystem.h"

namespace weightpath::probe {

// File text with surrounding whitespace and trailing NULs removed (device
// tree strings end in NUL); nullopt when the file cannot be read.
std::optional<std::string> ReadTrimmed(const Filesystem& filesystem, absl::string_view path);

// A decimal or 0x-prefixed hexadecimal number from a sysfs file.
std::optional<uint64_t> ReadNumber(const Filesystem& filesystem, absl::string_view path);

// Basename of the `driver` link in a device directory, nullopt when no
// driver is bound (the link is absent).
std::optional<std::string> BoundDriver(const Filesystem& filesystem, absl::string_view device_dir);

// "nvidia", "intel", "amd", "qualcomm", ... for a PCI vendor id; the id in
// hex ("0x1234") for one this table does not know.
std::string PciVendorName(uint32_t vendor_id);

// True when `name` is `prefix` followed by one or more digits ("cpu12").
bool IsNumberedEntry(absl::string_view name, absl::string_view prefix);

}  // namespace weightpath::probe
