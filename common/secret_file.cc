#include "common/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/unique_fd.h"
#include "openssl/rand.h"

namespace weightpath {
namespace {

constexpr size_t kMaxSecretBytes = 4096;
constexpr size_t kGeneratedTokenBytes = 32;

std::string Where(absl::string_view source, const std::string& path) {
  return absl::StrCat(source, "=", path);
}

absl::Status FileError(int error, absl::string_view what, absl::string_view source,
                      const std::string& path) {
  return ErrnoStatus(error, absl::StrCat(Where(source, path), ": cannot ", what));
}

absl::Status CheckMode(const struct stat& info, absl::string_view source, const std::string& path) {
  const mode_t mode = info.st_mode & 07777;
  const bool others = (mode & 0007) != 0;
  const bool group_write = (mode & 0020) != 0;
  const bool group_read_of_own_file = (mode & 0040) != 0 && info.st_uid == ::geteuid();
  if (others || group_write || group_read_of_own_file) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: mode %04o lets %s read it; a token file must be private to its owner "
        "(chmod 600 %s)",
        Where(source, path), mode, others ? "other users" : "its group", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view source) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(source, " is empty"));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(source, path), ": is a symlink; a token file must be a regular file"));
    }
    return FileError(errno, "open", source, path);
  }
  UniqueFd file(fd);
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) return FileError(errno, "stat", source, path);
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(source, path), ": is not a regular file"));
  }
  if (absl::Status mode = CheckMode(info, source, path); !mode.ok()) return mode;
  std::string contents;
  char buffer[1024];
  for (;;) {
    const ssize_t got = ::read(file.get(), buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      return FileError(errno, "read", source, path);
    }
    if (got == 0) break;
    contents.append(buffer, static_cast<size_t>(got));
    if (contents.size() > kMaxSecretBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(source, path), ": is larger than ", kMaxSecretBytes, " bytes; not a token file"));
    }
  }
  std::string token(absl::StripAsciiWhitespace(contents));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Where(source, path), ": holds no token"));
  }
  return token;
}

absl::StatusOr<CreatedSecret> ReadOrCreateSecretFile(const std::string& path,
                                                     absl::string_view source) {
  unsigned char random[kGeneratedTokenBytes];
  if (RAND_bytes(random, sizeof random) != 1) {
    return absl::InternalError(absl::StrCat(Where(source, path), ": no random bytes for a token"));
  }
  const std::string token = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(random), sizeof random));
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd < 0) {
    // Already there (a later start, or another replica of the same volume
    // won the race): read it with every check a configured file gets.
    if (errno == EEXIST) {
      absl::StatusOr<std::string> existing = ReadSecretFile(path, source);
      if (!existing.ok()) return existing.status();
      return CreatedSecret{*std::move(existing), false};
    }
    return FileError(errno, "create", source, path);
  }
  UniqueFd file(fd);
  const std::string line = token + "\n";
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t put = ::write(file.get(), line.data() + written, line.size() - written);
    if (put < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::unlink(path.c_str());
      return FileError(error, "write", source, path);
    }
    written += static_cast<size_t>(put);
  }
  if (::fsync(file.get()) != 0) {
    const int error = errno;
    ::unlink(path.c_str());
    return FileError(error, "sync", source, path);
  }
  return CreatedSecret{token, true};
}

}  // namespace weightpath
