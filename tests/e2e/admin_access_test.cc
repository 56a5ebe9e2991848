// Admin access as a new operator meets it: the real weightpath-server on its
// defaults creates an admin token beside its SQLite file and the real
// weightpathctl finds the server and the token from the environment or its
// config file, with no flags.
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

mode_t ModeOf(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return 0;
  return info.st_mode & 07777;
}

class AdminAccessTest : public ::testing::Test {
 protected:
  // weightpathctl with only the environment to go by; HOME is the test's
  // folder, so no operator's own config file takes part.
  ProcessResult Ctl(std::vector<std::string> args, std::map<std::string, std::string> environment) {
    args.insert(args.begin(), WEIGHTPATHCTL_PATH);
    environment.emplace("HOME", dir_.path());
    environment.emplace("WEIGHTPATH_CONFIG", "");
    environment.emplace("WEIGHTPATH_TOKEN_FILE", "");
    environment.emplace("WEIGHTPATH_SERVER", "");
    return RunProcess(args, environment);
  }

  void ResolveOneDevice(const std::string& address) {
    auto stub = v1::WeightPath::NewStub(PlaintextChannel(address));
    v1::ResolveWeightPathResponse response;
    ASSERT_TRUE(CallResolve(*stub, ArmRequest("arm-1"), &response).ok());
  }

  TempDir dir_;
};

TEST_F(AdminAccessTest, OnDefaultsTheServerCreatesATokenThatCtlFindsWithoutFlags) {
  const std::string token_file = dir_.File("admin.token");
  std::string token;
  {
    auto server = ServerProcess::Start(
        {"--store=sqlite:" + dir_.File("fleet.db"), "--fleet_refresh_interval=100ms"});
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_EQ(ModeOf(token_file), 0600u);
    token = ReadFileOrDie(token_file);
    ASSERT_EQ(token.size(), 65u) << token;  // 64 hex characters and a newline
    // The path once, the token never.
    const std::string log = (*server)->Log();
    EXPECT_THAT(log, AllOf(HasSubstr(token_file), HasSubstr("created now"),
                           Not(HasSubstr(token.substr(0, 64)))));
    ResolveOneDevice((*server)->grpc_address());

    ProcessResult devices;
    ASSERT_TRUE(Eventually([&] {
      devices = Ctl({"devices"}, {{"WEIGHTPATH_SERVER", (*server)->grpc_address()},
                                  {"WEIGHTPATH_TOKEN_FILE", token_file}});
      return devices.exit_code == 0 && devices.out.find("arm-1") != std::string::npos;
    })) << devices.err;

    // The same through the config file alone.
    WriteFileOrDie(dir_.File("ctl.yaml"),
                   absl::StrCat("server: ", (*server)->grpc_address(), "\ntoken_file: admin.token\n"));
    ProcessResult summary = Ctl({"summary"}, {{"WEIGHTPATH_CONFIG", dir_.File("ctl.yaml")}});
    EXPECT_EQ(summary.exit_code, 0) << summary.err;
    EXPECT_THAT(summary.out, HasSubstr("TOTAL"));

    // Without a token the refusal says what to send.
    ProcessResult anonymous = Ctl({"summary"}, {{"WEIGHTPATH_SERVER", (*server)->grpc_address()}});
    EXPECT_EQ(anonymous.exit_code, 1);
    EXPECT_THAT(anonymous.err, HasSubstr("operator identity"));
  }
  // A later start keeps the token, so a configured weightpathctl keeps working.
  auto again = ServerProcess::Start({"--store=sqlite:" + dir_.File("fleet.db")});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ReadFileOrDie(token_file), token);
  EXPECT_THAT((*again)->Log(), AllOf(HasSubstr(token_file), HasSubstr("kept from an earlier start")));
  ProcessResult summary = Ctl({"summary"}, {{"WEIGHTPATH_SERVER", (*again)->grpc_address()},
                                           {"WEIGHTPATH_TOKEN_FILE", token_file}});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
}

TEST_F(AdminAccessTest, AWidenedModeOrASymlinkInPlaceOfTheTokenStopsTheServer) {
  const std::string token_file = dir_.File("admin.token");
  WriteFileOrDie(token_file, "planted\n");
  ::chmod(token_file.c_str(), 0644);
  ExitResult widened = ServerProcess::RunToExit(
      {"--store=sqlite:" + dir_.File("fleet.db")}, absl::Seconds(60));
  EXPECT_NE(widened.exit_code, 0);
  EXPECT_THAT(widened.log, AllOf(HasSubstr(token_file), HasSubstr("mode 0644")));

  ASSERT_EQ(::unlink(token_file.c_str()), 0);
  WriteSecretFileOrDie(dir_.File("elsewhere"), "x\n");
  ASSERT_EQ(::symlink(dir_.File("elsewhere").c_str(), token_file.c_str()), 0);
  ExitResult symlinked = ServerProcess::RunToExit(
      {"--store=sqlite:" + dir_.File("fleet.db")}, absl::Seconds(60));
  EXPECT_NE(symlinked.exit_code, 0);
  EXPECT_THAT(symlinked.log, AllOf(HasSubstr(token_file), HasSubstr("symlink")));

  // A configured token file is held to the same rule.
  WriteFileOrDie(dir_.File("configured.token"), "t\n");
  ::chmod(dir_.File("configured.token").c_str(), 0604);
  ExitResult configured = ServerProcess::RunToExit(
      {"--store=none", "--admin_token_file=" + dir_.File("configured.token")}, absl::Seconds(60));
  EXPECT_NE(configured.exit_code, 0);
  EXPECT_THAT(configured.log,
              AllOf(HasSubstr("--admin_token_file=" + dir_.File("configured.token")),
                    HasSubstr("mode 0604")));
}

TEST_F(AdminAccessTest, WithoutAStateDirectoryTheLogSaysHowToGetAdminAccess) {
  auto server = ServerProcess::Start({"--store=none"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Log(), AllOf(HasSubstr("FleetAdmin answers no one"),
                                      HasSubstr("--admin_token_file FILE")));
  EXPECT_EQ(ModeOf(dir_.File("admin.token")), 0u);
}

TEST_F(AdminAccessTest, EachIdentityGetsItsRoleAndACallBeyondItNamesBoth) {
  WriteSecretFileOrDie(dir_.File("viewer.token"), "viewer-token-1\n");
  WriteSecretFileOrDie(dir_.File("operator.token"), "operator-token-2\n");
  WriteSecretFileOrDie(dir_.File("admin.token"), "admin-token-3\n");
  WriteFileOrDie(dir_.File("server.yaml"),
                 absl::StrCat("operators:\n"
                              "  - {name: vera, role: viewer, token_file: ", dir_.File("viewer.token"),
                              "}\n"
                              "  - {name: otto, role: operator, token_file: ",
                              dir_.File("operator.token"), "}\n"));
  auto server = ServerProcess::Start({"--store=sqlite:" + dir_.File("fleet.db"),
                                      "--config=" + dir_.File("server.yaml"),
                                      "--admin_token_file=" + dir_.File("admin.token")});
  ASSERT_TRUE(server.ok()) << server.status();
  // Identities are configured, so nothing is generated.
  EXPECT_THAT((*server)->Log(), Not(HasSubstr("no operator identity configured")));
  auto as = [&](const std::string& token, std::vector<std::string> args) {
    return Ctl(std::move(args), {{"WEIGHTPATH_SERVER", (*server)->grpc_address()},
                                 {"WEIGHTPATH_TOKEN_FILE", dir_.File(token)}});
  };

  ProcessResult viewer_reads = as("viewer.token", {"summary"});
  EXPECT_EQ(viewer_reads.exit_code, 0) << viewer_reads.err;
  ProcessResult viewer_lists = as("viewer.token", {"rollout", "list"});
  EXPECT_EQ(viewer_lists.exit_code, 0) << viewer_lists.err;
  // A dry run writes nothing, so the viewer's role is enough (PlanRollout).
  WriteFileOrDie(dir_.File("r-1.yaml"),
                 "id: r-1\nselector: {all: true}\naction: {set_priority: fidelity}\n"
                 "stages: [{percent: 100, report_timeout_seconds: 60}]\n");
  ProcessResult viewer_plans = as("viewer.token", {"apply", "-f", dir_.File("r-1.yaml"), "--dry-run"});
  EXPECT_EQ(viewer_plans.exit_code, 0) << viewer_plans.err;
  EXPECT_THAT(viewer_plans.out, HasSubstr("rollout/r-1 would be created"));

  ProcessResult viewer_pauses = as("viewer.token", {"rollout", "pause", "r-1", "--reason", "x"});
  EXPECT_EQ(viewer_pauses.exit_code, 1);
  EXPECT_THAT(viewer_pauses.err,
              AllOf(HasSubstr("PauseRollout: PERMISSION_DENIED: "),
                    HasSubstr("FleetAdmin.PauseRollout needs role operator"),
                    HasSubstr("\"vera\" has role viewer")));
  EXPECT_THAT((*server)->Log(), HasSubstr("FleetAdmin.PauseRollout from"));

  // The operator is admitted: the rollout simply does not exist.
  for (const char* token : {"operator.token", "admin.token"}) {
    ProcessResult pauses = as(token, {"rollout", "pause", "r-1", "--reason", "x"});
    EXPECT_EQ(pauses.exit_code, 1) << token;
    EXPECT_THAT(pauses.err, AllOf(HasSubstr("r-1"), Not(HasSubstr("needs role")))) << token;
  }
}

TEST_F(AdminAccessTest, OperatorTokenFilesAreCheckedAndNeverShared) {
  WriteSecretFileOrDie(dir_.File("a.token"), "same-token\n");
  WriteSecretFileOrDie(dir_.File("b.token"), "same-token\n");
  WriteFileOrDie(dir_.File("server.yaml"),
                 absl::StrCat("operators:\n"
                              "  - {name: a, role: viewer, token_file: ", dir_.File("a.token"), "}\n"
                              "  - {name: b, role: admin, token_file: ", dir_.File("b.token"), "}\n"));
  ExitResult shared = ServerProcess::RunToExit(
      {"--store=none", "--config=" + dir_.File("server.yaml")}, absl::Seconds(60));
  EXPECT_NE(shared.exit_code, 0);
  EXPECT_THAT(shared.log, AllOf(HasSubstr("server.yaml:3: operators[1] token_file"),
                                HasSubstr("same token as operator \"a\"")));

  ::chmod(dir_.File("b.token").c_str(), 0644);
  ExitResult widened = ServerProcess::RunToExit(
      {"--store=none", "--config=" + dir_.File("server.yaml")}, absl::Seconds(60));
  EXPECT_NE(widened.exit_code, 0);
  EXPECT_THAT(widened.log, AllOf(HasSubstr("operators[1] token_file=" + dir_.File("b.token")),
                                 HasSubstr("mode 0644")));
}

}  // namespace
}  // namespace weightpath::server::testing
