// Files that hold a credential (an operator bearer token): read by the
// server and by weightpathctl, created by the server on first start. A
// secret is read through one descriptor opened without following a
// symlink, so the checks below are made on the file that is read.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weightpath {

// The token in the regular file at `path`, surrounding whitespace removed.
// Refused, each error naming `source` (e.g. "--admin_token_file") and the
// path:
//  * a symlink, or anything but a regular file (INVALID_ARGUMENT);
//  * any access for others, group write, or group read of a file the
//    reading user owns (FAILED_PRECONDITION naming the mode and the chmod
//    that fixes it). Group read of a file someone else owns is allowed:
//    that is how a Kubernetes Secret volume (root:fsGroup, 0440) or a
//    root:weightpath 0440 file reaches an unprivileged server, and there
//    the group is the only way in;
//  * empty, or over 4 KiB (INVALID_ARGUMENT); missing (NOT_FOUND).
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view source);

struct CreatedSecret {
  std::string token;
  bool created = false;  // false: the file was already there and was read
};

// The token in `path`, creating the file first if there is none: 32
// random bytes as 64 hex characters, mode 0600, created with O_EXCL and
// O_NOFOLLOW (a symlink or a file planted in its place is never written
// through) and synced before it is used. An existing file is read with
// ReadSecretFile, so a symlink or a widened mode is refused, not reused.
absl::StatusOr<CreatedSecret> ReadOrCreateSecretFile(const std::string& path,
                                                     absl::string_view source);

}  // namespace weightpath
