#include "server/file_fingerprint.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    const int error = errno;
    const std::string message = absl::StrCat(path, ": ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(message);
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", info.st_size,
                                                   " bytes; at most ", max_bytes,
                                                   " are accepted"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot be opened for reading"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace weightpath::server
