// Reading a whole input file, with errors that name the file.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace weightpath::ctl {

// NOT_FOUND / PERMISSION_DENIED / INVALID_ARGUMENT (a directory) naming `path`.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace weightpath::ctl
