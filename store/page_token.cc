#include "store/page_token.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace weightpath::store {
namespace {
// Versioned so a later token format can be told apart.
constexpr absl::string_view kPrefix = "wp1:";
}

std::string EncodePageToken(std::string_view last_device_id) {
  return absl::WebSafeBase64Escape(absl::StrCat(kPrefix, std::string(last_device_id)));
}

absl::StatusOr<std::string> DecodePageToken(std::string_view token) {
  std::string decoded;
  if (!absl::WebSafeBase64Unescape(std::string(token), &decoded) || !absl::StartsWith(decoded, kPrefix)) {
    return absl::InvalidArgumentError(
        "page_token is not a token this server issued; pass next_page_token unchanged");
  }
  return decoded.substr(kPrefix.size());
}

}  // namespace weightpath::store
