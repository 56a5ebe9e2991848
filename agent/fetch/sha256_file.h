// SHA-256 of a file, streamed, as lowercase hex.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace weightpath::agent {

// NOT_FOUND when the file is missing, INTERNAL on a read or digest failure.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

// 64 lowercase hex digits.
bool IsSha256Hex(const std::string& text);

}  // namespace weightpath::agent
