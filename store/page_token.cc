#include "store/page_token.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"

namespace weightpath::store {
namespace {
// Versioned so a later token format can be told apart.
constexpr absl::string_view kPrefix = "wp1:";
constexpr absl::string_view kAuditPrefix = "wpa1:";
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

std::string EncodeAuditPageToken(const AuditCursor& oldest) {
  return absl::WebSafeBase64Escape(absl::StrCat(kAuditPrefix, oldest.time_us, ":", oldest.id));
}

absl::StatusOr<AuditCursor> DecodeAuditPageToken(std::string_view token) {
  std::string decoded;
  absl::string_view rest;
  AuditCursor cursor;
  if (absl::WebSafeBase64Unescape(std::string(token), &decoded) &&
      absl::StartsWith(decoded, kAuditPrefix)) {
    rest = absl::string_view(decoded).substr(kAuditPrefix.size());
    const std::vector<absl::string_view> parts = absl::StrSplit(rest, ':');
    if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &cursor.time_us) &&
        absl::SimpleAtoi(parts[1], &cursor.id)) {
      return cursor;
    }
  }
  return absl::InvalidArgumentError(
      "page_token is not a token this server issued; pass next_page_token unchanged");
}

}  // namespace weightpath::store
