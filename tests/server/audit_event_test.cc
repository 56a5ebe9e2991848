// What the audit trail keeps of a request (server/api/audit_event.h) and
// how device-chosen version strings become label values
// (BoundVersionLabels, server/observability/metrics.h).
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/audit_event.h"
#include "server/observability/metrics.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::server {
namespace {

using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

TEST(AuditEventTest, TheTargetIsTheIdTheRolloutsIdOrTheDevice) {
  v1::RolloutControlRequest control;
  control.set_id("r-1");
  EXPECT_EQ(AuditTarget(control), "r-1");
  v1::CreateRolloutRequest create;
  create.mutable_rollout()->set_id("r-2");
  EXPECT_EQ(AuditTarget(create), "r-2");
  v1::GetDeviceRequest device;
  device.set_device_id("arm-1");
  EXPECT_EQ(AuditTarget(device), "arm-1");
  EXPECT_EQ(AuditTarget(v1::FleetSummaryRequest()), "");
}

TEST(AuditEventTest, TheSummaryIsOneBoundedLineWithControlCharactersEscaped) {
  v1::RolloutControlRequest control;
  control.set_id("r-1\nINFO forged line");
  control.set_reason("why");
  const std::string summary = AuditRequestSummary(control);
  EXPECT_THAT(summary, AllOf(HasSubstr("id: \"r-1"), HasSubstr("forged line"),
                             HasSubstr("reason: \"why\""), Not(HasSubstr("\n"))));
  EXPECT_EQ(AuditTarget(control), "r-1\\x0aINFO forged line");

  v1::CreateRolloutRequest create;
  create.mutable_rollout()->set_id("r-long");
  create.mutable_rollout()->set_description(std::string(100000, 'd'));
  for (int i = 0; i < 200; ++i) create.mutable_rollout()->add_stages()->set_percent(i % 100 + 1);
  const std::string bounded = AuditRequestSummary(create);
  EXPECT_LE(bounded.size(), kAuditSummaryMaxBytes + 32);
  EXPECT_THAT(bounded, AllOf(HasSubstr("id: \"r-long\""), HasSubstr(" bytes)")));
  EXPECT_THAT(bounded, Not(HasSubstr(std::string(kAuditSummaryStringMaxBytes + 1, 'd'))));
}

TEST(AuditEventTest, TextIsCutOnACharacterBoundaryAndSaysHowMuchIsLeftOut) {
  EXPECT_EQ(AuditText("short", 10), "short");
  EXPECT_EQ(AuditText("tab\there", 64), "tab\\x09here");
  // "é" is two bytes: a cut inside it backs off to before it.
  EXPECT_EQ(AuditText("abé", 3), "ab ...(+2 bytes)");
  EXPECT_THAT(AuditText(std::string(300, 'x'), 256), EndsWith(" ...(+44 bytes)"));
}

TEST(VersionLabelsTest, TheMostCommonPlausibleVersionsKeepTheirNamesTheRestIsOther) {
  std::map<std::string, uint64_t> counts = {
      {"", 4},                       // predates the columns, or sent none
      {"0.3.1", 50},
      {"0.3.1 (patched)", 7},        // not a version string
      {"v1\nforged", 1},
      {std::string(65, '1'), 1},     // too long
      {"other", 2},                  // a device cannot take the folded series' name
      {"sha256:0123456789abcdef", 1},
  };
  for (int i = 0; i < 30; ++i) counts[absl::StrCat("0.2.", i)] = 40 - i;
  const std::map<std::string, uint64_t> bounded = BoundVersionLabels(counts, "sha256:0123456789abcdef");
  // 20 kept, the one to keep, unknown and other.
  EXPECT_THAT(bounded, SizeIs(kVersionLabelsKept + 3));
  EXPECT_EQ(bounded.at("0.3.1"), 50u);
  EXPECT_EQ(bounded.at("sha256:0123456789abcdef"), 1u);
  EXPECT_EQ(bounded.at(kUnknownVersionLabel), 4u);
  EXPECT_EQ(bounded.count("0.2.18"), 1u);  // the 20th most common
  EXPECT_EQ(bounded.count("0.2.19"), 0u);
  // Folded: 7 + 1 + 1 + 2, and 0.2.19 .. 0.2.29 (21 down to 11 devices).
  uint64_t beyond = 0;
  for (int i = 19; i < 30; ++i) beyond += 40 - i;
  EXPECT_EQ(bounded.at(kOtherVersionLabel), 11u + beyond);
  uint64_t total_in = 0, total_out = 0;
  for (const auto& [value, count] : counts) total_in += count;
  for (const auto& [value, count] : bounded) total_out += count;
  EXPECT_EQ(total_in, total_out);
  // "other" and the version to keep are always there, so the gauge has
  // their series before any device is counted.
  const std::map<std::string, uint64_t> empty = BoundVersionLabels({}, "sha256:0123456789abcdef");
  EXPECT_EQ(empty, (std::map<std::string, uint64_t>{{kOtherVersionLabel, 0},
                                                    {"sha256:0123456789abcdef", 0}}));
}

}  // namespace
}  // namespace weightpath::server
