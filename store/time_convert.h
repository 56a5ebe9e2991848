// The store's time precision: integer microseconds since the Unix epoch in
// its columns (exact, and sortable by SQL in both backends). A time is
// truncated toward the infinite past to whole microseconds on the way in, so
// 1969-12-31T23:59:59.9999995Z is stored as -1 us, never rounded up to 0.
// Timestamps the store hands back are at that precision; ToTimestamp gives a
// time the same precision before it reaches a message, so a record read back
// from the database equals the one built in memory.
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "common/proto_time.h"
#include "google/protobuf/timestamp.pb.h"

namespace weightpath::store {

// absl::ToUnixMicros rounds toward the infinite past.
inline int64_t ToMicros(absl::Time time) { return absl::ToUnixMicros(time); }
inline absl::Time FromMicros(int64_t micros) { return absl::FromUnixMicros(micros); }

// `time` at the store's precision, as a Timestamp (common/proto_time.h).
inline google::protobuf::Timestamp ToTimestamp(absl::Time time) {
  return ToProtoTime(FromMicros(ToMicros(time)));
}

}  // namespace weightpath::store
