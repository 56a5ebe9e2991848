// Printing a ResolveWeightPathResponse for people (text) or programs (the
// protobuf JSON mapping with proto field names and defaults printed). Shared
// by the offline and the server-backed resolve.
#pragma once

#include <ostream>
#include <string_view>

#include "absl/status/statusor.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::ctl {

enum class OutputFormat { kText, kJson };

// "text" or "json"; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view text);

absl::Status WriteResolveResponse(const v1::ResolveWeightPathResponse& response,
                                  OutputFormat format, std::ostream& out);

}  // namespace weightpath::ctl
