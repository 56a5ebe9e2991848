// weightpathctl audit against the real server with a SQLite store: the
// rollout commands an operator ran, refused ones included, as a table, as
// JSON, bounded by --limit and --since; bad flags are usage errors.
#include <string>
#include <vector>

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
  // Oldest first.
  EXPECT_LT(table.out.find("CreateRollout"), table.out.find("PauseRollout"));

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
