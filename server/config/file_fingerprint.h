// Cheap change detection for files a watcher polls. Kubernetes ConfigMap
// volumes update a file by re-pointing a `..data` symlink at a new directory,
// which leaves the watched path's own inode and mtime untouched; following
// every link and recording where it ends catches that as well as an
// in-place rewrite or a rename over the file.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace weightpath::server {

struct FileFingerprint {
  bool exists = false;
  std::string resolved_path;  // after following every symlink
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  int64_t size = 0;

  bool operator==(const FileFingerprint& other) const;
  bool operator!=(const FileFingerprint& other) const { return !(*this == other); }
};

// Never fails: a missing or unreadable file is a fingerprint too (exists =
// false), so its disappearance and return are both changes.
FileFingerprint TakeFingerprint(const std::string& path);

// The whole regular file at `path`, read through one descriptor that every
// check is made on, and never more than `max_bytes` + 1 bytes of it, whatever
// the path turns into while it is read. Errors name the path: NOT_FOUND,
// PERMISSION_DENIED, INVALID_ARGUMENT (not a regular file, naming what it
// is; over `max_bytes`), UNAVAILABLE (any other open or read error).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, size_t max_bytes);

}  // namespace weightpath::server
