#include "common/unique_fd.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace weightpath {

absl::Status ErrnoStatus(int error, absl::string_view context) {
  // strerror_r (the GNU form, which returns the text): strerror may share
  // one buffer between threads.
  char buffer[256];
  const std::string message = absl::StrCat(context, ": ", ::strerror_r(error, buffer, sizeof buffer));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EEXIST:
      return absl::AlreadyExistsError(message);
    case EINVAL:
      return absl::InvalidArgumentError(message);
    default:
      return absl::UnavailableError(message);
  }
}

}  // namespace weightpath
