// absl::Time <-> google.protobuf.Timestamp, the one conversion every layer
// uses. A Timestamp is whole seconds since the Unix epoch plus nanos that are
// always in [0, 1e9), also before 1970 (1969-12-31T23:59:59.5Z is seconds -1,
// nanos 500000000), over 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z.
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"

namespace weightpath {

// The range google.protobuf.Timestamp defines, in its own units.
inline constexpr int64_t kMinTimestampSeconds = -62135596800;  // 0001-01-01T00:00:00Z
inline constexpr int64_t kMaxTimestampSeconds = 253402300799;  // 9999-12-31T23:59:59Z
inline constexpr int32_t kMaxTimestampNanos = 999999999;

// The earliest and latest instants a Timestamp can hold.
absl::Time MinProtoTime();
absl::Time MaxProtoTime();

// Whether `timestamp` is one the format allows: seconds within the range
// above and nanos in [0, 1e9).
bool IsValidProtoTime(const google::protobuf::Timestamp& timestamp);

// `time` as a Timestamp, rounded toward the infinite past to whole
// nanoseconds (absl::Time is finer). A time outside the Timestamp range,
// absl::InfinitePast() and absl::InfiniteFuture() included, is clamped to
// the nearest end: every Timestamp this writes is valid.
google::protobuf::Timestamp ToProtoTime(absl::Time time);

// The instant `timestamp` names. One that IsValidProtoTime refuses is read
// as seconds + nanos and clamped to the Timestamp range, so it still maps to
// a finite time; callers that take Timestamps from outside check
// IsValidProtoTime first to refuse them instead.
absl::Time FromProtoTime(const google::protobuf::Timestamp& timestamp);

}  // namespace weightpath
