// Opaque keyset page tokens: the last device id of a page, encoded so clients
// treat it as a cookie rather than something to edit.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace weightpath::store {

std::string EncodePageToken(std::string_view last_device_id);
// INVALID_ARGUMENT naming page_token when it was not made by EncodePageToken.
absl::StatusOr<std::string> DecodePageToken(std::string_view token);

// The same for ListAuditEvents: the cursor of the oldest event of a page.
std::string EncodeAuditPageToken(const AuditCursor& oldest);
// INVALID_ARGUMENT naming page_token when it was not made by EncodeAuditPageToken.
absl::StatusOr<AuditCursor> DecodeAuditPageToken(std::string_view token);

}  // namespace weightpath::store
