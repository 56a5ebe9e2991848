#include "ctl/admin_output.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/proto_time.h"
#include "deploy/stage_text.h"

namespace weightpath::ctl {

std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp) {
  if (timestamp.seconds() == 0 && timestamp.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(timestamp.seconds()),
                          absl::UTCTimeZone());
}

std::string RunningText(const v1::Device& device) {
  if (!device.has_running()) return "-";
  if (device.running().nothing_running()) return "none";
  return device.running().path();
}

std::string DriftText(const v1::Device& device, absl::Time now) {
  if (!device.has_drift()) return "-";
  const absl::Duration drifting =
      std::max(absl::ZeroDuration(), now - FromProtoTime(device.drift().since()));
  return absl::StrCat(device.drift().reason(), " for ", deploy::FormatSeconds(drifting));
}

std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.empty()) return "-";
  const std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string FormatFigure(double value, uint32_t samples) {
  if (samples == 0) return "-";
  return absl::StrFormat("%.1f", value);
}

absl::StatusOr<absl::Duration> ParseSince(absl::string_view text, absl::string_view flag) {
  absl::string_view days = text;
  int64_t day_count = 0;
  if (absl::ConsumeSuffix(&days, "d") && absl::SimpleAtoi(days, &day_count) && day_count >= 0) {
    return absl::Hours(24 * day_count);
  }
  absl::Duration duration;
  if (!absl::ParseDuration(text, &duration) || duration < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=\"", text, "\" must be a duration such as 30m, 24h or 7d"));
  }
  return duration;
}

}  // namespace weightpath::ctl
