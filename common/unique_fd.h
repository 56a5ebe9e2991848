// One owner for a POSIX file descriptor, and one way to turn a failed
// system call's errno into an absl::Status.
#pragma once

#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace weightpath {

// Closes its descriptor when it goes away, so no early return leaks one.
// Move-only: exactly one object owns a descriptor. Closing keeps errno as it
// was, so an error path may still read the errno of the call that failed
// after an owner has closed its descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes `fd`, which may be negative (a failed open(): then nothing is owned).
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  // Gives the descriptor up without closing it; -1 afterwards.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

  // Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0 && fd_ != fd) {
      const int saved_errno = errno;
      ::close(fd_);
      errno = saved_errno;
    }
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// "`context`: <strerror(error)>", with the code a caller can act on:
// NOT_FOUND for a missing file or directory (ENOENT, ENOTDIR),
// PERMISSION_DENIED (EACCES, EPERM), ALREADY_EXISTS (EEXIST),
// INVALID_ARGUMENT (EINVAL: the call does not apply, e.g. readlink of a
// file that is not a link), and UNAVAILABLE for the rest (an I/O error, a
// full disk, a descriptor limit), which may pass when tried again.
absl::Status ErrnoStatus(int error, absl::string_view context);

}  // namespace weightpath
