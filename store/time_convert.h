// absl::Time <-> google.protobuf.Timestamp <-> the integer microseconds the
// store keeps in its columns (exact, and sortable by SQL in both backends).
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"

namespace weightpath::store {

inline google::protobuf::Timestamp ToTimestamp(absl::Time time) {
  google::protobuf::Timestamp out;
  const int64_t micros = absl::ToUnixMicros(time);
  int64_t seconds = micros / 1000000;
  int64_t remainder = micros % 1000000;
  if (remainder < 0) {
    remainder += 1000000;
    seconds -= 1;
  }
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(remainder * 1000));
  return out;
}

inline absl::Time FromTimestamp(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

inline int64_t ToMicros(absl::Time time) { return absl::ToUnixMicros(time); }
inline absl::Time FromMicros(int64_t micros) { return absl::FromUnixMicros(micros); }

}  // namespace weightpath::store
