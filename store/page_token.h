// Opaque keyset page tokens: the last device id of a page, encoded so clients
// treat it as a cookie rather than something to edit.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace weightpath::store {

std::string EncodePageToken(std::string_view last_device_id);
// INVALID_ARGUMENT naming page_token when it was not made by EncodePageToken.
absl::StatusOr<std::string> DecodePageToken(std::string_view token);

}  // namespace weightpath::store
