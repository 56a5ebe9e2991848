// Reading a small local input file (a config, a profile, a PEM file, a
// saved decision, a measurement) without trusting what the path names.
//
// A path can name something that is not a file of a few KiB: /dev/zero
// (endless bytes: reading it whole ends in bad_alloc), a FIFO (open() and
// read() block until a writer comes, which may be never), a directory, or a
// symlink swapped for one of those between a check and the read. So the
// path is opened once, without blocking, and everything else is asked of
// that descriptor: it must be a regular file, and at most `max_bytes` of it
// are read.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weightpath::agent {

// Limit for input files an operator or an engine harness writes by hand or
// by script: far above any real one, far below what hurts a small device.
inline constexpr size_t kMaxLocalInputBytes = size_t{1} << 20;

// Whether a symlink as the path's last component is followed. An operator's
// input (a config, a PEM file) may well be one; a file only the agent
// writes, always by renaming a regular file over it, never is, and a
// symlink there was planted to make the agent read something else.
enum class FinalSymlink { kFollow, kRefuse };

// The whole contents of the regular file at `path`. `what` names the input
// in every error ("--file", "config file", "WEIGHTPATH_HW_PROFILE"):
//   NOT_FOUND          the path does not exist
//   PERMISSION_DENIED  it cannot be opened for reading
//   INVALID_ARGUMENT   it is not a regular file (naming what it is: with
//                      FinalSymlink::kRefuse also "a symbolic link"), or it
//                      holds more than `max_bytes`
//   UNAVAILABLE        any other open or read error
absl::StatusOr<std::string> ReadLocalFile(const std::string& path, absl::string_view what,
                                          size_t max_bytes = kMaxLocalInputBytes,
                                          FinalSymlink symlink = FinalSymlink::kFollow);

}  // namespace weightpath::agent
