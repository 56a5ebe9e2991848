// absl::Time <-> google.protobuf.Timestamp: nanos in [0, 1e9) before 1970,
// the ends of the Timestamp range, clamping past them, and rounding of
// absl::Time's sub-nanosecond ticks toward the infinite past.
#include "common/proto_time.h"

#include <cstdint>
#include <limits>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace weightpath {
namespace {

google::protobuf::Timestamp Timestamp(int64_t seconds, int32_t nanos) {
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(seconds);
  timestamp.set_nanos(nanos);
  return timestamp;
}

void ExpectTimestamp(const google::protobuf::Timestamp& actual, int64_t seconds, int32_t nanos) {
  EXPECT_EQ(actual.seconds(), seconds);
  EXPECT_EQ(actual.nanos(), nanos);
}

TEST(ProtoTime, EpochAndAfter) {
  ExpectTimestamp(ToProtoTime(absl::UnixEpoch()), 0, 0);
  ExpectTimestamp(ToProtoTime(absl::FromUnixNanos(1'700'000'000'123'456'789)), 1'700'000'000,
                  123'456'789);
}

TEST(ProtoTime, BeforeNineteenSeventyNanosStayNonNegative) {
  // Half a second before the epoch is second -1 plus half a second.
  ExpectTimestamp(ToProtoTime(absl::UnixEpoch() - absl::Milliseconds(500)), -1, 500'000'000);
  ExpectTimestamp(ToProtoTime(absl::UnixEpoch() - absl::Nanoseconds(1)), -1, 999'999'999);
  ExpectTimestamp(ToProtoTime(absl::UnixEpoch() - absl::Seconds(1)), -1, 0);
  // 1969-07-20T20:17:40.25Z.
  const absl::Time landing = absl::FromCivil(absl::CivilSecond(1969, 7, 20, 20, 17, 40),
                                             absl::UTCTimeZone()) +
                             absl::Milliseconds(250);
  ExpectTimestamp(ToProtoTime(landing), -14'182'940, 250'000'000);
  EXPECT_EQ(FromProtoTime(ToProtoTime(landing)), landing);
}

TEST(ProtoTime, SubNanosecondsRoundTowardTheInfinitePast) {
  const absl::Duration quarter = absl::Nanoseconds(1) / 4;
  ExpectTimestamp(ToProtoTime(absl::UnixEpoch() + quarter), 0, 0);
  ExpectTimestamp(ToProtoTime(absl::UnixEpoch() + absl::Nanoseconds(1) - quarter), 0, 0);
  ExpectTimestamp(ToProtoTime(absl::UnixEpoch() - quarter), -1, 999'999'999);
}

TEST(ProtoTime, RangeEndsRoundTrip) {
  const absl::Time first = absl::FromCivil(absl::CivilSecond(1, 1, 1, 0, 0, 0), absl::UTCTimeZone());
  const absl::Time last =
      absl::FromCivil(absl::CivilSecond(9999, 12, 31, 23, 59, 59), absl::UTCTimeZone()) +
      absl::Nanoseconds(999'999'999);
  EXPECT_EQ(MinProtoTime(), first);
  EXPECT_EQ(MaxProtoTime(), last);
  ExpectTimestamp(ToProtoTime(first), kMinTimestampSeconds, 0);
  ExpectTimestamp(ToProtoTime(last), kMaxTimestampSeconds, kMaxTimestampNanos);
  EXPECT_EQ(FromProtoTime(Timestamp(kMinTimestampSeconds, 0)), first);
  EXPECT_EQ(FromProtoTime(Timestamp(kMaxTimestampSeconds, kMaxTimestampNanos)), last);
  EXPECT_TRUE(IsValidProtoTime(ToProtoTime(first)));
  EXPECT_TRUE(IsValidProtoTime(ToProtoTime(last)));
}

TEST(ProtoTime, TimesOutsideTheRangeAreClampedToItsEnds) {
  ExpectTimestamp(ToProtoTime(MinProtoTime() - absl::Nanoseconds(1)), kMinTimestampSeconds, 0);
  ExpectTimestamp(ToProtoTime(absl::InfinitePast()), kMinTimestampSeconds, 0);
  ExpectTimestamp(ToProtoTime(MaxProtoTime() + absl::Nanoseconds(1)), kMaxTimestampSeconds,
                  kMaxTimestampNanos);
  ExpectTimestamp(ToProtoTime(absl::InfiniteFuture()), kMaxTimestampSeconds, kMaxTimestampNanos);
}

TEST(ProtoTime, InvalidTimestampsAreRefusedByTheCheckAndClampedByTheReader) {
  EXPECT_FALSE(IsValidProtoTime(Timestamp(0, -1)));
  EXPECT_FALSE(IsValidProtoTime(Timestamp(0, 1'000'000'000)));
  EXPECT_FALSE(IsValidProtoTime(Timestamp(kMinTimestampSeconds - 1, 0)));
  EXPECT_FALSE(IsValidProtoTime(Timestamp(kMaxTimestampSeconds + 1, 0)));
  EXPECT_TRUE(IsValidProtoTime(Timestamp(-1, 999'999'999)));

  // Read arithmetically: second 0 less one nanosecond is just before the epoch.
  EXPECT_EQ(FromProtoTime(Timestamp(0, -1)), absl::UnixEpoch() - absl::Nanoseconds(1));
  EXPECT_EQ(FromProtoTime(Timestamp(std::numeric_limits<int64_t>::max(), 0)), MaxProtoTime());
  EXPECT_EQ(FromProtoTime(Timestamp(std::numeric_limits<int64_t>::min(), 0)), MinProtoTime());
}

TEST(ProtoTime, EveryNanosecondAroundTheEpochRoundTrips) {
  for (int64_t nanos = -2'000; nanos <= 2'000; ++nanos) {
    const absl::Time time = absl::FromUnixNanos(nanos);
    const google::protobuf::Timestamp timestamp = ToProtoTime(time);
    ASSERT_TRUE(IsValidProtoTime(timestamp)) << nanos;
    ASSERT_EQ(FromProtoTime(timestamp), time) << nanos;
  }
}

}  // namespace
}  // namespace weightpath
