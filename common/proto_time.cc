#include "common/proto_time.h"

#include <algorithm>

namespace weightpath {

absl::Time MinProtoTime() { return absl::FromUnixSeconds(kMinTimestampSeconds); }

absl::Time MaxProtoTime() {
  return absl::FromUnixSeconds(kMaxTimestampSeconds) + absl::Nanoseconds(kMaxTimestampNanos);
}

bool IsValidProtoTime(const google::protobuf::Timestamp& timestamp) {
  return timestamp.seconds() >= kMinTimestampSeconds && timestamp.seconds() <= kMaxTimestampSeconds &&
         timestamp.nanos() >= 0 && timestamp.nanos() <= kMaxTimestampNanos;
}

google::protobuf::Timestamp ToProtoTime(absl::Time time) {
  const absl::Time clamped = std::clamp(time, MinProtoTime(), MaxProtoTime());
  // Both round toward the infinite past, so the remainder is in [0, 1 s).
  const int64_t seconds = absl::ToUnixSeconds(clamped);
  const int64_t nanos = absl::ToInt64Nanoseconds(clamped - absl::FromUnixSeconds(seconds));
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(seconds);
  timestamp.set_nanos(static_cast<int32_t>(nanos));
  return timestamp;
}

absl::Time FromProtoTime(const google::protobuf::Timestamp& timestamp) {
  const absl::Time time =
      absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
  return std::clamp(time, MinProtoTime(), MaxProtoTime());
}

}  // namespace weightpath
