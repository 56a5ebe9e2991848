#include "agent/report/pending_reports.h"

#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/report/outcome_report.h"
#include "common/control_characters.h"
#include "common/report_limits.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/agent/fake_clock.h"
#include "tests/agent/temp_dir.h"

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::FakeClock;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteTextFile;

v1::ReportOutcomeRequest Report(int n) {
  v1::ReportOutcomeRequest report;
  report.set_device_id("edge-0001");
  report.set_outcome(v1::OUTCOME_BOOT_OK);
  report.set_boot_source(v1::BOOT_SOURCE_LAST_GOOD);
  report.set_idempotency_key(absl::StrCat("key-", n));
  return report;
}

std::string JsonLine(const v1::ReportOutcomeRequest& report) {
  std::string line;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(report, &line).ok());
  return line + "\n";
}

std::vector<std::string> Keys(const std::vector<v1::ReportOutcomeRequest>& reports) {
  std::vector<std::string> keys;
  for (const auto& report : reports) keys.push_back(report.idempotency_key());
  return keys;
}

// A server that takes each report `takes` of the timeout it is given (a
// hung or slow store: the whole of it), answering `answer` each time.
struct SlowServer {
  FakeClock* clock;
  absl::Status answer;
  std::vector<absl::Duration> timeouts;
  absl::Status operator()(const v1::ReportOutcomeRequest&, absl::Duration timeout) {
    timeouts.push_back(timeout);
    if (!answer.ok()) clock->Advance(timeout);
    return answer;
  }
};

// 33 reports (the boot's and 32 waiting) to a server that holds each one to
// its 10 s timeout, 3 s of the budget left: was 330 s, one call after the
// other; now one call clipped to the 3 s, the rest kept in order.
TEST(AgentPendingReports, SendingEndsWithTheDeadlineAndKeepsTheRestInOrder) {
  FakeClock clock;
  std::vector<v1::ReportOutcomeRequest> reports;
  for (int i = 0; i < 33; ++i) reports.push_back(Report(i));
  SlowServer server{&clock, absl::DeadlineExceededError("ReportOutcome: deadline exceeded"), {}};
  const MonotonicTime start = clock.MonotonicNow();
  const std::vector<v1::ReportOutcomeRequest> left =
      SendReports(reports, std::ref(server), absl::Seconds(10), clock, start + absl::Seconds(3),
                  "boot");
  EXPECT_THAT(server.timeouts, ElementsAre(absl::Seconds(3)));
  EXPECT_EQ(clock.MonotonicNow() - start, absl::Seconds(3));
  EXPECT_EQ(Keys(left), Keys(reports)) << "nothing lost, nothing reordered";
}

TEST(AgentPendingReports, AServerThatTakesThemGetsThemAllWithinTheDeadline) {
  FakeClock clock;
  std::vector<v1::ReportOutcomeRequest> reports;
  for (int i = 0; i < 5; ++i) reports.push_back(Report(i));
  SlowServer server{&clock, absl::OkStatus(), {}};
  EXPECT_TRUE(SendReports(reports, std::ref(server), absl::Seconds(5), clock,
                          clock.MonotonicNow() + absl::Seconds(30), "run")
                  .empty());
  EXPECT_EQ(server.timeouts.size(), 5u);
}

TEST(AgentPendingReports, NoTimeLeftSendsNothingAndKeepsEverything) {
  FakeClock clock;
  SlowServer server{&clock, absl::OkStatus(), {}};
  const std::vector<v1::ReportOutcomeRequest> left =
      SendReports({Report(0), Report(1)}, std::ref(server), absl::Seconds(5), clock,
                  clock.MonotonicNow(), "boot");
  EXPECT_TRUE(server.timeouts.empty());
  EXPECT_THAT(Keys(left), ElementsAre("key-0", "key-1"));
}

// A refusal would be refused again: that report is dropped and the next
// one sent. A server that could not take one is not asked for the rest.
TEST(AgentPendingReports, ARefusalIsDroppedAndAnUnavailableServerEndsTheSending) {
  FakeClock clock;
  int calls = 0;
  auto server = [&](const v1::ReportOutcomeRequest& report, absl::Duration) {
    ++calls;
    if (report.idempotency_key() == "key-0") return absl::InvalidArgumentError("refused");
    if (report.idempotency_key() == "key-1") return absl::OkStatus();
    return absl::UnavailableError("connection refused");
  };
  const std::vector<v1::ReportOutcomeRequest> left =
      SendReports({Report(0), Report(1), Report(2), Report(3), Report(4)}, server,
                  absl::Seconds(5), clock, clock.MonotonicNow() + absl::Seconds(30), "run");
  EXPECT_EQ(calls, 3);
  EXPECT_THAT(Keys(left), ElementsAre("key-2", "key-3", "key-4"));
}

TEST(AgentPendingReports, LoadingKeepsTheNewest32AndSaysHowManyWereDropped) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += JsonLine(Report(i));
  WriteTextFile(PendingReportsPath(dir.path()), text);
  ::testing::internal::CaptureStderr();
  const std::vector<v1::ReportOutcomeRequest> loaded = LoadPendingReports(dir.path());
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(loaded.size(), kMaxPendingReports);
  EXPECT_EQ(loaded.front().idempotency_key(), "key-8");
  EXPECT_EQ(loaded.back().idempotency_key(), "key-39");
  EXPECT_THAT(log, HasSubstr("8 older report(s) dropped, the newest 32 kept"));
}

// A symlink planted in place of the file (to /etc/shadow, say) is not
// followed, and nothing of its target reaches the log.
TEST(AgentPendingReports, ASymlinkInPlaceOfTheFileIsNotFollowed) {
  TempDir dir;
  WriteTextFile(dir.Sub("secret"), "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\n");
  ASSERT_EQ(::symlink(dir.Sub("secret").c_str(), PendingReportsPath(dir.path()).c_str()), 0);
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(LoadPendingReports(dir.path()).empty());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, AllOf(HasSubstr("is a symbolic link, not a regular file (not followed)"),
                         Not(HasSubstr("$6$")), Not(HasSubstr("root:"))));
  EXPECT_THAT(ReadTextFile(dir.Sub("secret")), HasSubstr("root:$6$")) << "the target untouched";
}

// Lines that are not reports: the warning names the line, its offset and
// the kind of fault, never the text (protobuf's own message quotes it).
TEST(AgentPendingReports, ALineThatIsNotAReportIsNamedByPositionNotByContent) {
  TempDir dir;
  const std::string first = JsonLine(Report(1));
  WriteTextFile(PendingReportsPath(dir.path()),
                absl::StrCat(first, "root:$6$saltsalt$hashhash:19000:0:99999:7:::\n",
                             "{\"secretFieldName\": 1}\n", "{\"outcome\": \"TOPSECRET\"}\n",
                             JsonLine(Report(2))));
  ::testing::internal::CaptureStderr();
  const std::vector<v1::ReportOutcomeRequest> loaded = LoadPendingReports(dir.path());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(Keys(loaded), ElementsAre("key-1", "key-2"));
  EXPECT_THAT(log, AllOf(HasSubstr(absl::StrCat("line 2 (byte offset ", first.size(),
                                                ", 44 bytes) is not a report (not JSON)")),
                         HasSubstr("line 3 (byte offset"), HasSubstr("(an unknown field)"),
                         HasSubstr("line 4 (byte offset"), HasSubstr("(a value of the wrong type)")));
  EXPECT_THAT(log, AllOf(Not(HasSubstr("$6$")), Not(HasSubstr("root")),
                         Not(HasSubstr("secretFieldName")), Not(HasSubstr("TOPSECRET"))));
}

// An error quoting a hostile answer is escaped before it is cut to the
// server's 1024 bytes, so the escapes count: 1024 stray bytes make 4096
// bytes of escapes, cut back to 1024, all valid UTF-8.
TEST(AgentOutcomeReport, TheDetailIsEscapedBeforeItIsCutToTheServersLimit) {
  const v1::ResolveWeightPathResponse about;
  const v1::ReportOutcomeRequest report = OutcomeReport(
      "edge-0001", v1::OUTCOME_ENGINE_START_FAILED, about, std::string(2000, '\xff'),
      absl::FromUnixSeconds(1'700'000'000));
  EXPECT_EQ(report.detail().size(), kMaxOutcomeDetailBytes);
  EXPECT_EQ(report.detail().substr(0, 8), "\\xff\\xff");
  EXPECT_FALSE(HasControlCharacters(report.detail()));

  const v1::ReportOutcomeRequest mixed =
      OutcomeReport("edge-0001", v1::OUTCOME_ENGINE_START_FAILED, about,
                    "HTTP/1.1 2\xff\xfe OK\n\xc3\xa9t\xc3\xa9", absl::FromUnixSeconds(1));
  EXPECT_EQ(mixed.detail(), "HTTP/1.1 2\\xff\\xfe OK\\x0a\xc3\xa9t\xc3\xa9");
}

// A boot that downloaded its build reports the bytes by source once, and
// a report waiting in state_dir for the server keeps them.
TEST(AgentOutcomeReport, ABootReportCarriesTheBytesItsBuildDownloadedBySource) {
  DecisionRecord booted;
  booted.source = DecisionSource::kServer;
  booted.downloaded = DownloadedBytes{3'000'000'000, 4'096};
  const v1::ReportOutcomeRequest report = BootReport(
      "edge-0001", v1::OUTCOME_BOOT_OK, booted, "", absl::FromUnixSeconds(1'700'000'000));
  EXPECT_EQ(report.downloaded_from_mirrors_bytes(), 3'000'000'000u);
  EXPECT_EQ(report.downloaded_from_origin_bytes(), 4'096u);

  TempDir dir;
  ASSERT_TRUE(SavePendingReports({report}, dir.path()).ok());
  const std::vector<v1::ReportOutcomeRequest> loaded = LoadPendingReports(dir.path());
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].downloaded_from_mirrors_bytes(), 3'000'000'000u);
  EXPECT_EQ(loaded[0].downloaded_from_origin_bytes(), 4'096u);

  // A build already cached downloads nothing, and says so.
  const v1::ReportOutcomeRequest cached = BootReport(
      "edge-0001", v1::OUTCOME_BOOT_OK, DecisionRecord{}, "", absl::FromUnixSeconds(1));
  EXPECT_EQ(cached.downloaded_from_mirrors_bytes() + cached.downloaded_from_origin_bytes(), 0u);
}

// A boot says what runs (the booted decision), and a report kept in
// state_dir keeps it; one the server would refuse for its `running` is sent
// without it rather than lost.
TEST(AgentOutcomeReport, ABootReportSaysWhatRunsAndLeavesOutWhatTheServerWouldRefuse) {
  DecisionRecord booted;
  booted.source = DecisionSource::kLastGood;
  booted.response.mutable_weight_path()->set_name("w4a8-amx");
  booted.response.set_model("Spark-X2.5-1.7B");
  booted.response.mutable_artifact()->set_sha256(std::string(64, 'c'));
  booted.response.set_decision_etag("0123456789abcdef0123456789abcdef");
  const v1::ReportOutcomeRequest report =
      BootReport("edge-0001", v1::OUTCOME_BOOT_OK, booted, "", absl::FromUnixSeconds(1));
  EXPECT_EQ(report.running().path(), "w4a8-amx");
  EXPECT_EQ(report.running().source(), v1::BOOT_SOURCE_LAST_GOOD);
  TempDir dir;
  ASSERT_TRUE(SavePendingReports({report}, dir.path()).ok());
  const std::vector<v1::ReportOutcomeRequest> loaded = LoadPendingReports(dir.path());
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].running().decision_etag(), "0123456789abcdef0123456789abcdef");

  const v1::ReportOutcomeRequest failed =
      BootReport("edge-0001", v1::OUTCOME_BOOT_FAILED, booted, "", absl::FromUnixSeconds(1));
  EXPECT_TRUE(failed.running().nothing_running());

  for (const auto& spoil : std::vector<std::function<void(DecisionRecord&)>>{
           [](DecisionRecord& r) { r.response.set_model(std::string(300, 'm')); },
           [](DecisionRecord& r) { r.response.mutable_artifact()->set_sha256("ABC"); },
           [](DecisionRecord& r) { r.response.mutable_weight_path()->set_name("a\nb"); }}) {
    DecisionRecord odd = booted;
    spoil(odd);
    const v1::ReportOutcomeRequest sent =
        BootReport("edge-0001", v1::OUTCOME_BOOT_OK, odd, "", absl::FromUnixSeconds(1));
    EXPECT_FALSE(sent.has_running());
    EXPECT_EQ(sent.outcome(), v1::OUTCOME_BOOT_OK) << "the report itself still goes";
  }
}

}  // namespace
}  // namespace weightpath::agent
