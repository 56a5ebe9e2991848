// weightpathctl audit against the real server with a SQLite store: the
// rollout commands an operator ran, refused ones included, as a table, as
// JSON, bounded by --limit and --since; bad flags are usage errors. A trail
// larger than gRPC's message limit is read page by page, and text other
// operators sent cannot drive the terminal.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/store/store_backends.h"
#include "absl/strings/match.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"

namespace weightpath::server::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using weightpath::testing::ProcessResult;
using weightpath::testing::RunProcess;

class CtlAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    auto started = ServerProcess::Start(
        {"--store=sqlite:" + dir_.File("fleet.db"), "--admin_token_file=" + dir_.File("token")});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    WriteFileOrDie(dir_.File("rollout.yaml"),
                   "id: lab-fidelity\n"
                   "selector: {match_labels: {site: lab-a}}\n"
                   "action: {set_priority: PRIORITY_FIDELITY}\n"
                   "stages:\n"
                   "  - {percent: 100, min_bake_seconds: 3600, min_reporting_devices: 1,"
                   " report_timeout_seconds: 3600}\n");
    ASSERT_EQ(Ctl({"rollout", "create", "-f", dir_.File("rollout.yaml")}).exit_code, 0);
    ASSERT_EQ(Ctl({"rollout", "pause", "lab-fidelity", "--reason", "checking the lab"}).exit_code, 0);
    ASSERT_EQ(Ctl({"rollout", "pause", "no-such-rollout", "--reason", "typo"}).exit_code, 1);
  }

  ProcessResult Ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--server=" + server_->grpc_address());
    argv.push_back("--token-file=" + dir_.File("token"));
    return RunProcess(argv);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(CtlAuditTest, ListsEveryRolloutCommandWithItsCallerAndAnswer) {
  ProcessResult table = Ctl({"audit"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, AllOf(HasSubstr("TIME"), HasSubstr("IDENTITY"), HasSubstr("RESULT"),
                               HasSubstr("CreateRollout"), HasSubstr("lab-fidelity"),
                               HasSubstr("NOT_FOUND"), HasSubstr("no-such-rollout"),
                               HasSubstr("admin")));
  EXPECT_THAT(table.out, Not(HasSubstr("older events left out")));
  // Oldest first: the server's own load of its policy at start, then the calls.
  EXPECT_LT(table.out.find("PolicyLoaded"), table.out.find("CreateRollout"));
  EXPECT_LT(table.out.find("CreateRollout"), table.out.find("PauseRollout"));
  EXPECT_THAT(table.out, AllOf(HasSubstr("server:policy-file"), HasSubstr("system"),
                               HasSubstr("loaded at start: policy sha256:"),
                               HasSubstr("from bundled policy")));

  ProcessResult json = Ctl({"audit", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, AllOf(HasSubstr("\"request_summary\""), HasSubstr("checking the lab"),
                              HasSubstr("\"result\": \"OK\""), HasSubstr("\"replica\"")));
  ProcessResult yaml = Ctl({"audit", "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, HasSubstr("rpc: \"PauseRollout\""));
}

TEST_F(CtlAuditTest, LimitKeepsTheNewestAndSinceTakesADurationOrATime) {
  ProcessResult newest = Ctl({"audit", "--limit", "1"});
  ASSERT_EQ(newest.exit_code, 0) << newest.err;
  EXPECT_THAT(newest.out, AllOf(HasSubstr("no-such-rollout"), Not(HasSubstr("CreateRollout")),
                                HasSubstr("older events left out")));
  ProcessResult hour = Ctl({"audit", "--since", "1h"});
  ASSERT_EQ(hour.exit_code, 0) << hour.err;
  EXPECT_THAT(hour.out, HasSubstr("CreateRollout"));
  ProcessResult since_2020 = Ctl({"audit", "--since", "2020-01-01T00:00:00Z"});
  ASSERT_EQ(since_2020.exit_code, 0) << since_2020.err;
  EXPECT_THAT(since_2020.out, HasSubstr("CreateRollout"));
  ProcessResult future = Ctl({"audit", "--since", "2999-01-01T00:00:00Z", "-o", "json"});
  ASSERT_EQ(future.exit_code, 0) << future.err;
  EXPECT_THAT(future.out, Not(HasSubstr("CreateRollout")));
}

// 3,000 events of ~2.3 KB (a full summary and message each, as a viewer's
// refused calls with long reasons leave) come to ~7 MB: one answer of 10,000
// events was refused by the client ("Received message larger than max
// (14046814 vs. 4194304)"). Pages of at most 3 MiB, walked back by
// weightpathctl, list every one.
TEST_F(CtlAuditTest, ATrailPastTheMessageLimitIsListedWholePageByPage) {
  std::vector<store::testing::AuditRow> rows(3000);
  const absl::Time start = absl::Now() - absl::Minutes(10);
  for (int i = 0; i < 3000; ++i) {
    rows[i].time = start + absl::Milliseconds(i);
    rows[i].target = absl::StrCat("bulk-", i);
    rows[i].request_summary = std::string(1024, 's');
    rows[i].message = std::string(1024, 'm');
  }
  const absl::Status inserted =
      store::testing::InsertAuditRows("sqlite:" + dir_.File("fleet.db"), rows);
  ASSERT_TRUE(inserted.ok()) << inserted;
  auto admin = v1::FleetAdmin::NewStub(PlaintextChannel(server_->grpc_address()));
  v1::ListAuditEventsRequest request;
  request.set_limit(10000);
  v1::ListAuditEventsResponse page;
  auto context = AdminContext();
  const grpc::Status status = admin->ListAuditEvents(context.get(), request, &page);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(page.truncated());
  EXPECT_FALSE(page.next_page_token().empty());
  EXPECT_LE(page.ByteSizeLong(), 3u * 1024 * 1024);
  EXPECT_GT(page.events_size(), 1000);
  EXPECT_LT(page.events_size(), 3000);
  // The page holds the newest: the fixture's calls came after the bulk.
  EXPECT_EQ(page.events(page.events_size() - 1).target(), "no-such-rollout");

  ProcessResult json = Ctl({"audit", "--limit", "10000", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const std::vector<std::string> bulk = absl::StrSplit(json.out, "\"target\": \"bulk-");
  EXPECT_EQ(bulk.size(), 3001u);
  EXPECT_LT(json.out.find("\"bulk-0\""), json.out.find("\"bulk-2999\""));
  EXPECT_TRUE(absl::StrContains(json.out, "lab-fidelity"));
  // The newest 2,500: the server's policy load at start, the fixture's 3,
  // and bulk-504 to bulk-2999.
  ProcessResult some = Ctl({"audit", "--limit", "2500"});
  ASSERT_EQ(some.exit_code, 0) << some.err;
  EXPECT_TRUE(absl::StrContains(some.out, "bulk-2999 ") && absl::StrContains(some.out, "bulk-504 ") &&
              !absl::StrContains(some.out, "bulk-503 ") &&
              absl::StrContains(some.out, "older events left out"))
      << some.out.size() << " bytes of output";
}

// What an operator types (a rollout id, a reason) is shown to every other
// operator: C1 controls (U+009B is CSI) and bidi overrides (U+202E) in it
// reach the table escaped, never raw.
TEST_F(CtlAuditTest, TerminalControlsInAnotherOperatorsTextAreEscaped) {
  const std::string hostile = "lab\xc2\x9b" "31m\xe2\x80\xae" "txt";
  ASSERT_NE(Ctl({"rollout", "pause", hostile, "--reason", "x\xe2\x80\xa8y"}).exit_code, 0);
  ProcessResult table = Ctl({"audit"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, AllOf(HasSubstr("lab\\u009b31m\\u202etxt"), Not(HasSubstr("\xc2\x9b")),
                               Not(HasSubstr("\xe2\x80\xae")), Not(HasSubstr("\xe2\x80\xa8"))));
}

TEST_F(CtlAuditTest, BadFlagsAreUsageErrorsNamingTheFlag) {
  ProcessResult since = Ctl({"audit", "--since", "yesterday"});
  EXPECT_EQ(since.exit_code, 2);
  EXPECT_THAT(since.err, AllOf(HasSubstr("--since=\"yesterday\""), HasSubstr("RFC 3339")));
  for (const char* limit : {"0", "10001", "ten"}) {
    ProcessResult bad = Ctl({"audit", "--limit", limit});
    EXPECT_EQ(bad.exit_code, 2) << limit;
    EXPECT_THAT(bad.err, AllOf(HasSubstr("--limit"), HasSubstr("1 to 10000"))) << limit;
  }
  ProcessResult help = Ctl({"audit", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, AllOf(HasSubstr("--since"), HasSubstr("--limit"), HasSubstr("viewer")));
}

}  // namespace
}  // namespace weightpath::server::testing
