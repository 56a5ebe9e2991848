// Where weightpathctl finds its server and credentials: flag > environment >
// config file > default, each value naming its source in errors; and the
// real binary refusing a token file others can read, naming the file, its
// mode and where the path came from.
#include "ctl/client_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ctl/rollout_client.h"
#include "tests/support/subprocess.h"

namespace weightpath::ctl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;

class CtlClientConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ctl_client_config_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
    ASSERT_EQ(::mkdir((dir_ + "/.config").c_str(), 0700), 0);
    ASSERT_EQ(::mkdir((dir_ + "/.config/weightpath").c_str(), 0700), 0);
    environment_["HOME"] = dir_;
  }

  // The directory holds token files: none is left behind in the temp dir.
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }

  absl::StatusOr<ClientSettings> Resolve(const std::vector<std::string>& args) {
    absl::StatusOr<ParsedArguments> parsed = ParseArguments(args, ConnectionFlags());
    if (!parsed.ok()) return parsed.status();
    const std::map<std::string, std::string> environment = environment_;
    return ResolveClientSettings(*parsed, [environment](const std::string& name) {
      auto found = environment.find(name);
      return found == environment.end() ? std::nullopt
                                        : std::optional<std::string>(found->second);
    });
  }

  std::string dir_;
  std::map<std::string, std::string> environment_;
};

TEST_F(CtlClientConfigTest, WithNothingConfiguredTheServerIsTheDefaultAndNoTokenIsSent) {
  absl::StatusOr<ClientSettings> settings = Resolve({});
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->server.value, "127.0.0.1:50051");
  EXPECT_EQ(settings->server.source, "default");
  EXPECT_FALSE(settings->token_file.has_value());
  EXPECT_FALSE(settings->ca.has_value());
}

TEST_F(CtlClientConfigTest, FlagBeatsEnvironmentBeatsConfigFileBeatsDefault) {
  const std::string config = Write(".config/weightpath/config.yaml",
                                   "server: config-host:1\n"
                                   "token_file: tokens/admin.token\n"
                                   "tls:\n  ca: ca.pem\n");
  absl::StatusOr<ClientSettings> from_file = Resolve({});
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->server.value, "config-host:1");
  EXPECT_EQ(from_file->server.source, config + ":1 server");
  ASSERT_TRUE(from_file->token_file.has_value());
  // Relative to the config file, not to wherever weightpathctl runs.
  EXPECT_EQ(from_file->token_file->value, dir_ + "/.config/weightpath/tokens/admin.token");
  ASSERT_TRUE(from_file->ca.has_value());
  EXPECT_EQ(from_file->ca->source, config + ":4 tls.ca");

  environment_["WEIGHTPATH_SERVER"] = "env-host:2";
  environment_["WEIGHTPATH_TOKEN_FILE"] = "/env/token";
  absl::StatusOr<ClientSettings> from_environment = Resolve({});
  ASSERT_TRUE(from_environment.ok()) << from_environment.status();
  EXPECT_EQ(from_environment->server.value, "env-host:2");
  EXPECT_EQ(from_environment->server.source, "WEIGHTPATH_SERVER");
  EXPECT_EQ(from_environment->token_file->value, "/env/token");

  absl::StatusOr<ClientSettings> from_flags =
      Resolve({"--server", "flag-host:3", "--token-file", "/flag/token", "--ca", "/flag/ca"});
  ASSERT_TRUE(from_flags.ok()) << from_flags.status();
  EXPECT_EQ(from_flags->server.value, "flag-host:3");
  EXPECT_EQ(from_flags->server.source, "--server");
  EXPECT_EQ(from_flags->token_file->source, "--token-file");
  EXPECT_EQ(from_flags->ca->value, "/flag/ca");
}

TEST_F(CtlClientConfigTest, TheServerNameIsANameNotAPathAndTheFlagBeatsTheFile) {
  const std::string config = Write(".config/weightpath/config.yaml",
                                   "tls:\n  ca: ca.pem\n  server_name: wp-weightpath.fleet.svc\n");
  absl::StatusOr<ClientSettings> from_file = Resolve({});
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(from_file->server_name.has_value());
  EXPECT_EQ(from_file->server_name->value, "wp-weightpath.fleet.svc");
  EXPECT_EQ(from_file->server_name->source, config + ":3 tls.server_name");
  // Beside the file's CA: the name is not one of the files that come as a set.
  absl::StatusOr<ClientSettings> from_flag = Resolve({"--tls-server-name", "other.svc"});
  ASSERT_TRUE(from_flag.ok()) << from_flag.status();
  EXPECT_EQ(from_flag->server_name->value, "other.svc");
  EXPECT_EQ(from_flag->server_name->source, "--tls-server-name");
  EXPECT_EQ(from_flag->ca->value, dir_ + "/.config/weightpath/ca.pem");
}

TEST_F(CtlClientConfigTest, WeightpathConfigNamesTheFileInsteadOfTheHomeOne) {
  Write(".config/weightpath/config.yaml", "server: home-host:1\n");
  environment_["WEIGHTPATH_CONFIG"] = Write("other.yaml", "server: other-host:2\n");
  absl::StatusOr<ClientSettings> settings = Resolve({});
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->server.value, "other-host:2");
}

TEST_F(CtlClientConfigTest, BadConfigFilesAreRefusedWithFileAndLine) {
  const std::string config = Write(".config/weightpath/config.yaml",
                                   "server: a:1\n"
                                   "tokenfile: x\n");
  absl::StatusOr<ClientSettings> unknown = Resolve({});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              AllOf(HasSubstr(config + ":2:1: tokenfile"),
                    HasSubstr("unknown key 'tokenfile' (allowed: server, token_file, tls)")));

  Write(".config/weightpath/config.yaml", "tls:\n  certificate: c.pem\n");
  EXPECT_THAT(Resolve({}).status().message(),
              AllOf(HasSubstr(config + ":2:3: tls.certificate"),
                    HasSubstr("unknown key 'certificate' (allowed: ca, cert, key, server_name)")));

  Write(".config/weightpath/config.yaml", "server: [a, b]\n");
  EXPECT_THAT(Resolve({}).status().message(),
              AllOf(HasSubstr(config + ":1:9: server"),
                    HasSubstr("expected a non-empty string, got a list")));

  environment_["WEIGHTPATH_CONFIG"] = dir_ + "/missing.yaml";
  absl::StatusOr<ClientSettings> missing = Resolve({});
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              AllOf(HasSubstr("WEIGHTPATH_CONFIG"), HasSubstr("missing.yaml")));
}

TEST_F(CtlClientConfigTest, ACertificateWithoutItsKeyNamesWhereItCameFrom) {
  const std::string config =
      Write(".config/weightpath/config.yaml", "tls:\n  cert: client.pem\n");
  absl::StatusOr<ClientSettings> settings = Resolve({});
  ASSERT_TRUE(settings.ok()) << settings.status();
  absl::StatusOr<ParsedArguments> none = ParseArguments({}, ConnectionFlags());
  ASSERT_TRUE(none.ok());
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(*none, *settings);
  EXPECT_EQ(connection.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(connection.status().message(),
              AllOf(HasSubstr(config + ":2 tls.cert"), HasSubstr("without a key")));
}

TEST_F(CtlClientConfigTest, TheBinaryRefusesATokenFileOthersCanReadOrASymlink) {
  const std::string token = Write("admin.token", "secret\n", 0644);
  ProcessResult open_token =
      RunProcess({WEIGHTPATHCTL_PATH, "devices"},
                 {{"HOME", dir_}, {"WEIGHTPATH_CONFIG", ""}, {"WEIGHTPATH_SERVER", "127.0.0.1:1"},
                  {"WEIGHTPATH_TOKEN_FILE", token}});
  EXPECT_EQ(open_token.exit_code, 1) << open_token.err;
  EXPECT_THAT(open_token.err, AllOf(HasSubstr("WEIGHTPATH_TOKEN_FILE=" + token),
                                    HasSubstr("mode 0644"), HasSubstr("chmod 600")));

  ::chmod(token.c_str(), 0640);
  ProcessResult group = RunProcess({WEIGHTPATHCTL_PATH, "summary", "--server", "127.0.0.1:1",
                                    "--token-file", token},
                                   {{"HOME", dir_}, {"WEIGHTPATH_CONFIG", ""}});
  EXPECT_THAT(group.err, AllOf(HasSubstr("--token-file=" + token), HasSubstr("mode 0640")));

  ::chmod(token.c_str(), 0600);
  const std::string link = dir_ + "/link.token";
  ASSERT_EQ(::symlink(token.c_str(), link.c_str()), 0);
  const std::string config =
      Write(".config/weightpath/config.yaml", "server: 127.0.0.1:1\ntoken_file: " + link + "\n");
  ProcessResult symlinked =
      RunProcess({WEIGHTPATHCTL_PATH, "verification"}, {{"HOME", dir_}, {"WEIGHTPATH_CONFIG", ""}});
  EXPECT_EQ(symlinked.exit_code, 1) << symlinked.err;
  EXPECT_THAT(symlinked.err,
              AllOf(HasSubstr(config + ":2 token_file=" + link), HasSubstr("symlink")));
}

}  // namespace
}  // namespace weightpath::ctl
