// The probe's only window onto /proc, /sys and /dev. Every path is absolute
// as seen by the probed system ("/proc/cpuinfo") and is resolved under a
// root, so the same probe code reads the live machine ("/") or a captured
// tree of another device (tests/data/hardware/<device>).
#pragma once

#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace weightpath::probe {

class Filesystem {
 public:
  virtual ~Filesystem() = default;

  // Whole text of a file. NOT_FOUND when it does not exist, PERMISSION_DENIED
  // or UNAVAILABLE when it cannot be read; the message names the path.
  virtual absl::StatusOr<std::string> ReadFile(absl::string_view path) const = 0;

  // Entry names of a directory (no "." or ".."), sorted so that a probe's
  // output does not depend on readdir order.
  virtual absl::StatusOr<std::vector<std::string>> ListDirectory(absl::string_view path) const = 0;

  // Target text of a symbolic link, as stored (often relative). Sysfs encodes
  // facts such as a device's driver in link targets, not in file contents.
  virtual absl::StatusOr<std::string> ReadSymlink(absl::string_view path) const = 0;

  // True when anything (file, directory, device node, dangling link) exists.
  virtual bool Exists(absl::string_view path) const = 0;

  // The root everything resolves under, "/" for the live machine.
  virtual const std::string& root() const = 0;
};

// Reads the real filesystem under `root` ("/" for the live machine). The
// root is taken as given; ProbeHardware checks that it exists. Links inside
// the tree are followed by the kernel, so a captured tree must use relative
// link targets (as sysfs does): an absolute one would resolve on this machine.
std::unique_ptr<Filesystem> MakeRootedFilesystem(std::string root);

// Last component of a slash-separated path ("../../bus/pci/drivers/i915" ->
// "i915"); sysfs link targets are read this way.
absl::string_view PathBasename(absl::string_view path);

}  // namespace weightpath::probe
