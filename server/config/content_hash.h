// SHA-256 helpers shared by the catalog, the reload watcher and the tests.
#pragma once

#include "absl/strings/string_view.h"
#include <string>
#include <string_view>

namespace weightpath::server {

// 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view bytes);

// "sha256:" + the first 16 hex digits, the same short form the policy uses
// for its version, so both read alike in responses, logs and metrics.
std::string ShortContentVersion(absl::string_view bytes);

}  // namespace weightpath::server
