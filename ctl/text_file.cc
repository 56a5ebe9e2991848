#include "ctl/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"

namespace weightpath::ctl {

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    const int error = errno;
    std::string reason = std::strerror(error);
    if (error == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    if (error == EACCES) return absl::PermissionDeniedError(absl::StrCat(path, ": ", reason));
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", reason));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot be opened"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return text.str();
}

}  // namespace weightpath::ctl
