#include "agent/base/local_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_type.h"
#include "common/unique_fd.h"

namespace weightpath::agent {
absl::StatusOr<std::string> ReadLocalFile(const std::string& path, absl::string_view what,
                                          size_t max_bytes, FinalSymlink symlink) {
  // O_NONBLOCK: opening a FIFO for reading returns at once instead of
  // waiting for a writer; O_NOCTTY: a terminal never becomes ours. Neither
  // changes how a regular file is read.
  const int no_follow = symlink == FinalSymlink::kRefuse ? O_NOFOLLOW : 0;
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | no_follow));
  if (!file.valid()) {
    // O_NOFOLLOW's refusal of a final symlink is ELOOP.
    if (errno == ELOOP && no_follow != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", path, " is a symbolic link, not a regular file (not followed)"));
    }
    return ErrnoStatus(errno, absl::StrCat(what, ": cannot read ", path));
  }
  struct stat info;
  if (::fstat(file.get(), &info) != 0) {
    return ErrnoStatus(errno, absl::StrCat(what, ": cannot stat ", path));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", path, " is ", FileTypeName(info.st_mode), ", not a regular file"));
  }
  const std::string too_large =
      absl::StrCat(what, ": ", path, " is larger than the limit of ", max_bytes, " bytes");
  if (static_cast<uint64_t>(info.st_size) > max_bytes) return absl::InvalidArgumentError(too_large);
  // The size from fstat only sizes the buffer: the file may grow while it is
  // read, so the read itself stops one byte past the limit.
  std::string contents;
  contents.resize(std::min(max_bytes, static_cast<size_t>(info.st_size)) + 1);
  size_t have = 0;
  for (;;) {
    if (have == contents.size()) {
      if (have > max_bytes) return absl::InvalidArgumentError(too_large);
      contents.resize(std::min(max_bytes + 1, contents.size() * 2));
    }
    const ssize_t got = ::read(file.get(), contents.data() + have, contents.size() - have);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat(what, ": cannot read ", path));
    }
    if (got == 0) break;
    have += static_cast<size_t>(got);
  }
  if (have > max_bytes) return absl::InvalidArgumentError(too_large);
  contents.resize(have);
  return contents;
}

}  // namespace weightpath::agent
