#include "agent/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace weightpath::agent {
namespace {

absl::Status ErrnoError(absl::string_view action, const std::string& path) {
  return absl::InternalError(absl::StrCat(action, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, absl::string_view contents, const std::string& path) {
  while (!contents.empty()) {
    const ssize_t written = ::write(fd, contents.data(), contents.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write", path);
    }
    contents.remove_prefix(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SyncDirectory(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open directory", directory);
  const int result = ::fsync(fd);
  const int saved_errno = errno;
  ::close(fd);
  errno = saved_errno;
  if (result != 0) return ErrnoError("cannot fsync directory", directory);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const std::function<void()>& before_rename) {
  const std::filesystem::path target(path);
  const std::filesystem::path directory =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create directory ", directory.string(), ": ", error.message()));
  }
  // Same directory as the target: rename() is only atomic within one
  // filesystem.
  std::string temp_path = (directory / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(temp_path.data());
  if (fd < 0) return ErrnoError("cannot create a temporary file for", path);

  absl::Status status = WriteAll(fd, contents, temp_path);
  if (status.ok() && ::fchmod(fd, 0644) != 0) status = ErrnoError("cannot chmod", temp_path);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError("cannot fsync", temp_path);
  if (::close(fd) != 0 && status.ok()) status = ErrnoError("cannot close", temp_path);
  if (status.ok() && before_rename) before_rename();
  if (status.ok() && ::rename(temp_path.c_str(), path.c_str()) != 0) {
    status = ErrnoError("cannot rename a temporary file onto", path);
  }
  if (!status.ok()) {
    ::unlink(temp_path.c_str());
    return status;
  }
  return SyncDirectory(directory.string());
}

}  // namespace weightpath::agent
