#include "server/config/file_fingerprint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_type.h"
#include "common/unique_fd.h"

namespace weightpath::server {

bool FileFingerprint::operator==(const FileFingerprint& other) const {
  return exists == other.exists && resolved_path == other.resolved_path &&
         device == other.device && inode == other.inode && mtime_ns == other.mtime_ns &&
         ctime_ns == other.ctime_ns && size == other.size;
}

FileFingerprint TakeFingerprint(const std::string& path) {
  FileFingerprint fingerprint;
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return fingerprint;
  struct stat info;
  if (stat(resolved, &info) != 0) return fingerprint;
  fingerprint.exists = true;
  fingerprint.resolved_path = resolved;
  fingerprint.device = info.st_dev;
  fingerprint.inode = info.st_ino;
  fingerprint.mtime_ns = int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec;
  fingerprint.ctime_ns = int64_t{info.st_ctim.tv_sec} * 1000000000 + info.st_ctim.tv_nsec;
  fingerprint.size = info.st_size;
  return fingerprint;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, size_t max_bytes) {
  // One descriptor for every check and for the read. Checking the path and
  // then opening it again let it change in between: a symlink flipped from
  // the real file to /dev/zero was read without end. O_NONBLOCK so that a
  // FIFO put in the file's place is refused below instead of waiting for a
  // writer; it changes nothing for a regular file.
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, path);
  struct stat info;
  if (fstat(fd.get(), &info) != 0) return ErrnoStatus(errno, path);
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", FileTypeName(info.st_mode), ", not a regular file"));
  }
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", info.st_size,
                                                   " bytes; at most ", max_bytes,
                                                   " are accepted"));
  }
  // The file may still grow while it is read (a writer appending), so the
  // read itself stops one byte past the limit, which is then refused.
  const size_t cap = max_bytes + 1;
  std::string text;
  text.resize(std::min(cap, static_cast<size_t>(info.st_size) + 1));
  size_t filled = 0;
  while (filled < cap) {
    if (filled == text.size()) text.resize(std::min(cap, std::max<size_t>(4096, 2 * filled)));
    const ssize_t got = read(fd.get(), text.data() + filled, text.size() - filled);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat(path, ": read failed"));
    }
    if (got == 0) break;
    filled += static_cast<size_t>(got);
  }
  if (filled > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": grew past ", max_bytes,
                                                   " bytes while being read; at most ",
                                                   max_bytes, " are accepted"));
  }
  text.resize(filled);
  return text;
}

}  // namespace weightpath::server
