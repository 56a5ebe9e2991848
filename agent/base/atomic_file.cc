#include "agent/base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace weightpath::agent {
namespace {

constexpr absl::string_view kTemporaryInfix = ".tmp.";
constexpr char kMkstempTemplate[] = "XXXXXX";
constexpr size_t kMkstempLetters = sizeof(kMkstempTemplate) - 1;

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
  // TemporaryFileTarget and RemoveStaleTemporaryFiles know this name.
  std::string temp_path = (directory / absl::StrCat(".", target.filename().string(),
                                                    kTemporaryInfix, kMkstempTemplate))
                              .string();
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

absl::string_view TemporaryFileTarget(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, ".")) return {};
  if (name.size() < kTemporaryInfix.size() + kMkstempLetters + 1) return {};
  const absl::string_view letters = name.substr(name.size() - kMkstempLetters);
  for (char c : letters) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) return {};
  }
  name.remove_suffix(kMkstempLetters);
  if (!absl::ConsumeSuffix(&name, kTemporaryInfix)) return {};
  return name;
}

std::vector<std::string> RemoveStaleTemporaryFiles(
    const std::string& directory, const std::function<bool(absl::string_view)>& is_target,
    absl::Duration min_age) {
  std::vector<std::string> removed;
  std::error_code error;
  std::filesystem::directory_iterator entries(directory, error);
  if (error) return removed;
  // File times come from the kernel's real clock, so the age is taken
  // against the real wall clock, not an injected one.
  const absl::Time now = absl::Now();
  // increment(error), not a range-for: a directory that changes or fails
  // while being listed must end the listing, not throw.
  for (; entries != std::filesystem::directory_iterator(); entries.increment(error)) {
    if (error) break;
    const std::filesystem::directory_entry& entry = *entries;
    const std::string name = entry.path().filename().string();
    const absl::string_view target = TemporaryFileTarget(name);
    if (target.empty() || !is_target(target)) continue;
    const std::string path = entry.path().string();
    struct stat info;
    // lstat: a symlink is reported as itself and never followed.
    if (::lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    const absl::Duration age = now - absl::TimeFromTimespec(info.st_mtim);
    if (absl::AbsDuration(age) < min_age) continue;
    // unlink() removes the name; were it swapped for a symlink since the
    // lstat, the link itself would go, never what it points to.
    if (::unlink(path.c_str()) == 0) removed.push_back(path);
  }
  return removed;
}

}  // namespace weightpath::agent
