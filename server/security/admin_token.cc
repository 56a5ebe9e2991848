#include "server/security/admin_token.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/secret_file.h"
#include "spdlog/spdlog.h"
#include "store/store_url_text.h"

namespace weightpath::server {
namespace {

// Logged paths are absolute, so the line can be pasted from anywhere.
std::string Absolute(const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

}  // namespace

absl::StatusOr<std::string> DefaultAdminTokenFile(const std::string& state_dir,
                                                  const std::string& store_url) {
  if (state_dir.empty()) {
    spdlog::warn(
        "FleetAdmin answers no one: no operator identity is configured and --store={} gives no "
        "state directory to keep a generated admin token in; for admin access pass "
        "--admin_token_file FILE (a mode 600 file holding a token, e.g. from openssl rand -hex "
        "32), --admin_identity under mutual TLS, or run with --store=sqlite:FILE",
        store::RedactedStoreUrl(store_url));
    return std::string();
  }
  const std::string path =
      Absolute(state_dir == "." ? kDefaultAdminTokenFileName
                                : absl::StrCat(state_dir, "/", kDefaultAdminTokenFileName));
  absl::StatusOr<CreatedSecret> secret = ReadOrCreateSecretFile(path, "admin token file");
  if (!secret.ok()) return secret.status();
  spdlog::info(
      "FleetAdmin: no operator identity configured, so the admin token in {} ({}) admits "
      "operators; weightpathctl reads it with WEIGHTPATH_TOKEN_FILE={} or token_file in "
      "~/.config/weightpath/config.yaml",
      path, secret->created ? "created now, mode 600" : "kept from an earlier start", path);
  return path;
}

}  // namespace weightpath::server
