// A record, kept beside a cached artifact, that its full SHA-256 matched
// while the file had a given identity (size, mtime, ctime, inode, device).
//
// Why: re-hashing a multi-GB artifact on every boot costs seconds. While the
// file's identity is unchanged, nobody has written to it through the
// filesystem: any write moves ctime, which user space cannot set back, and a
// replacement brings a new inode. So a matching stamp lets a boot skip the
// hash. What a stamp cannot see is bit rot below the filesystem (the medium
// flipping bits without a write); that is caught only by the periodic full
// re-verification, which a stamp older than its maximum age forces.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace weightpath::agent {

struct FileIdentity {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t inode = 0;
  uint64_t device = 0;

  friend bool operator==(const FileIdentity& a, const FileIdentity& b) {
    return a.size == b.size && a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns &&
           a.inode == b.inode && a.device == b.device;
  }
  friend bool operator!=(const FileIdentity& a, const FileIdentity& b) { return !(a == b); }
};

struct VerifiedStamp {
  std::string sha256;
  FileIdentity identity;
  absl::Time verified_at;  // by the injected clock, for the stamp's age
};

// NOT_FOUND when the file is missing, INTERNAL for any other stat failure.
absl::StatusOr<FileIdentity> StatFileIdentity(const std::string& path);

// Where the stamp of `artifact_path` lives: beside it, `<path>.verified`.
std::string StampPathFor(const std::string& artifact_path);

// The stamp as text, one `key value` line per field.
std::string FormatStamp(const VerifiedStamp& stamp);

// DATA_LOSS naming the field when the text is not a whole, valid stamp
// (a torn or hand-edited file must never be trusted).
absl::StatusOr<VerifiedStamp> ParseStamp(const std::string& text);

// NOT_FOUND when there is no stamp, DATA_LOSS when it is garbled.
absl::StatusOr<VerifiedStamp> ReadStamp(const std::string& stamp_path);

// Replaces the stamp atomically: a crash leaves the old one or the new one.
absl::Status WriteStamp(const std::string& stamp_path, const VerifiedStamp& stamp);

// Whether the identity's ctime is so recent that a write in the same
// filesystem clock tick could still leave ctime unchanged. Such a file is
// hashed again at the next check instead of being stamped now (the same
// "racily clean" rule git applies to its index). `now` is the real time,
// because ctime comes from the kernel's real clock.
bool ChangedTooRecentlyToStamp(const FileIdentity& identity, absl::Time now);

}  // namespace weightpath::agent
