// Table cells shared by the operator subcommands (timestamps, labels,
// figures) and their look-back flag; -o json|yaml is ctl/view_output.h.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/map.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "weightpath/v1/fleet.pb.h"

namespace weightpath::ctl {

// RFC 3339 in UTC to the second; "-" when unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp);
// "k=v,k2=v2" in key order; "-" when there are none.
std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels);
// A figure with one decimal; "-" when there were no samples.
std::string FormatFigure(double value, uint32_t samples);

// What a device runs, for a table cell: its running path, "none" when
// nothing runs, "-" when its agent has not said.
std::string RunningText(const v1::Device& device);
// "rolled_back for 2h5m" when the device runs another build than it is
// assigned, else "-".
std::string DriftText(const v1::Device& device, absl::Time now);

// A look-back such as 30m or 24h (absl syntax) or 7d (whole days, which
// absl does not spell); INVALID_ARGUMENT naming `flag`.
absl::StatusOr<absl::Duration> ParseSince(absl::string_view text, absl::string_view flag);

}  // namespace weightpath::ctl
