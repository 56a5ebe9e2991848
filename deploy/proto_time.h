// Conversions between google.protobuf.Timestamp and absl::Time, so the
// rollout logic can take the clock as a plain parameter.
#pragma once

#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"

namespace weightpath::deploy {

inline absl::Time FromProtoTime(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

inline google::protobuf::Timestamp ToProtoTime(absl::Time time) {
  google::protobuf::Timestamp timestamp;
  int64_t seconds = absl::ToUnixSeconds(time);  // rounds toward negative infinity
  timestamp.set_seconds(seconds);
  timestamp.set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds))));
  return timestamp;
}

}  // namespace weightpath::deploy
