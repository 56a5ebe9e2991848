// Admin access on the embedded defaults. A server started with no operator
// identity (no --admin_token_file, no --admin_identity, no operators in
// --config) keeps an admin bearer token in its state directory, beside the
// SQLite file: created on the first start (random, mode 0600), reused on
// every later one, its path logged (never the token) so weightpathctl can
// be pointed at it (WEIGHTPATH_TOKEN_FILE or token_file in its config).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace weightpath::server {

inline constexpr char kDefaultAdminTokenFileName[] = "admin.token";

// The token file in `state_dir` ("" when the server has none: --store=none
// or PostgreSQL), created when missing; "" with a log line saying how to
// get admin access when there is no state directory. Errors name the file:
// a symlink or a file others can read in its place is refused, not reused.
absl::StatusOr<std::string> DefaultAdminTokenFile(const std::string& state_dir,
                                                  const std::string& store_url);

}  // namespace weightpath::server
