// The overload guards on their own, with an injected clock: token buckets
// per device, the in-flight count, and the pushback each refusal carries.
#include "server/security/device_call_limits.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/retry_pushback.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::server {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kT0 = 1000 * kSecond;

DeviceCallLimitOptions Rate(double per_second, double burst) {
  DeviceCallLimitOptions options;
  options.rate_per_second = per_second;
  options.burst = burst;
  return options;
}

TEST(ServerDeviceCallLimits, OffByDefault) {
  DeviceCallLimits limits{DeviceCallLimitOptions{}};
  EXPECT_FALSE(limits.enabled());
  for (int i = 0; i < 1000; ++i) ASSERT_THAT(limits.Admit("d", kT0).status(), IsOk());
}

TEST(ServerDeviceCallLimits, BurstThenRateWithThePushbackOfTheNextToken) {
  DeviceCallLimits limits(Rate(2, 3));  // a token every 500 ms, 3 at once
  for (int i = 0; i < 3; ++i) ASSERT_THAT(limits.Admit("d", kT0).status(), IsOk()) << i;
  ShedReason reason = ShedReason::kNone;
  absl::StatusOr<DeviceCallLimits::Admission> refused = limits.Admit("d", kT0, &reason);
  EXPECT_THAT(refused.status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("more than 2 calls a second (--device_rate_limit, burst 3)")));
  EXPECT_EQ(reason, ShedReason::kDeviceRate);
  EXPECT_EQ(RetryPushback(refused.status()), absl::Milliseconds(500));
  // 100 ms on, 400 ms to go; a refusal spends no token.
  EXPECT_EQ(RetryPushback(limits.Admit("d", kT0 + kSecond / 10).status()), absl::Milliseconds(400));
  EXPECT_THAT(limits.Admit("d", kT0 + kSecond / 2).status(), IsOk());
  EXPECT_FALSE(limits.Admit("d", kT0 + kSecond / 2).ok());
  // Idle long enough, the whole burst is back.
  for (int i = 0; i < 3; ++i) EXPECT_THAT(limits.Admit("d", kT0 + 10 * kSecond).status(), IsOk());
  EXPECT_FALSE(limits.Admit("d", kT0 + 10 * kSecond).ok());
}

TEST(ServerDeviceCallLimits, OneDeviceSpendingItsTokensLeavesTheOthersAlone) {
  DeviceCallLimits limits(Rate(1, 1));
  ASSERT_THAT(limits.Admit("noisy", kT0).status(), IsOk());
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(limits.Admit("noisy", kT0).ok());
  for (int i = 0; i < 5000; ++i) {
    ASSERT_THAT(limits.Admit(absl::StrCat("quiet-", i), kT0).status(), IsOk()) << i;
  }
}

TEST(ServerDeviceCallLimits, MemoryIsFixedAndOverflowOnlyForgives) {
  DeviceCallLimitOptions options = Rate(1, 1);
  options.tracked_devices = 256;  // 64 shards x one window of 4
  DeviceCallLimits limits(options);
  // Ten times more devices throttled at once than there are entries: each
  // first call still passes, nobody is refused for a stranger's calls, and
  // a device whose entry was taken at worst gets its full bucket back.
  int refused_first_calls = 0;
  for (int i = 0; i < 5120; ++i) {
    if (!limits.Admit(absl::StrCat("device-", i), kT0).ok()) ++refused_first_calls;
  }
  EXPECT_EQ(refused_first_calls, 0);
  // A device that keeps calling keeps its entry against older ones.
  ASSERT_THAT(limits.Admit("steady", kT0 + 1).status(), IsOk());
  EXPECT_FALSE(limits.Admit("steady", kT0 + 2).ok());
}

TEST(ServerDeviceCallLimits, InflightPlacesAreHeldUntilTheAdmissionGoes) {
  DeviceCallLimitOptions options;
  options.max_inflight = 2;
  DeviceCallLimits limits(options);
  absl::StatusOr<DeviceCallLimits::Admission> first = limits.Admit("a", kT0);
  absl::StatusOr<DeviceCallLimits::Admission> second = limits.Admit("b", kT0);
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_EQ(limits.inflight(), 2);
  ShedReason reason = ShedReason::kNone;
  absl::StatusOr<DeviceCallLimits::Admission> third = limits.Admit("c", kT0 + 12345678, &reason);
  EXPECT_THAT(third.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                       HasSubstr("2 device calls are in flight")));
  EXPECT_EQ(reason, ShedReason::kInflight);
  const std::optional<absl::Duration> pushback = RetryPushback(third.status());
  ASSERT_TRUE(pushback.has_value());
  EXPECT_GE(*pushback, absl::Milliseconds(100));
  EXPECT_LT(*pushback, absl::Milliseconds(300));
  EXPECT_EQ(limits.inflight(), 2) << "a refusal holds no place";
  // Moving keeps one place; destroying frees it.
  DeviceCallLimits::Admission moved = *std::move(first);
  EXPECT_EQ(limits.inflight(), 2);
  { DeviceCallLimits::Admission gone = std::move(moved); }
  EXPECT_EQ(limits.inflight(), 1);
  EXPECT_THAT(limits.Admit("c", kT0).status(), IsOk());  // a temporary, released at once
  EXPECT_EQ(limits.inflight(), 1);
}

TEST(ServerDeviceCallLimits, ARateRefusalGivesBackTheInflightPlace) {
  DeviceCallLimitOptions options = Rate(1, 1);
  options.max_inflight = 10;
  DeviceCallLimits limits(options);
  absl::StatusOr<DeviceCallLimits::Admission> held = limits.Admit("d", kT0);
  ASSERT_THAT(held.status(), IsOk());
  EXPECT_FALSE(limits.Admit("d", kT0).ok());
  EXPECT_EQ(limits.inflight(), 1);
}

TEST(ServerDeviceCallLimits, PushbackSurvivesTheTrailerRoundTrip) {
  EXPECT_EQ(ParseRetryPushback("250"), absl::Milliseconds(250));
  EXPECT_EQ(ParseRetryPushback("0"), absl::ZeroDuration());
  EXPECT_EQ(ParseRetryPushback("-1"), absl::InfiniteDuration());
  EXPECT_EQ(ParseRetryPushback("soon"), absl::InfiniteDuration());
  EXPECT_EQ(RetryPushback(absl::UnavailableError("no pushback")), std::nullopt);
  EXPECT_EQ(RetryPushback(WithRetryPushback(absl::ResourceExhaustedError("x"), absl::Seconds(2))),
            absl::Seconds(2));
  EXPECT_EQ(RetryPushback(WithRetryPushback(absl::ResourceExhaustedError("x"),
                                            absl::InfiniteDuration())),
            absl::InfiniteDuration());
}

}  // namespace
}  // namespace weightpath::server
