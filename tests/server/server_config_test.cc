// Flags and --config FILE: the file adds values, the command line wins.
#include "server/config/server_config.h"

#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/store_url_text.h"
#include "tests/server/server_process.h"
#include "tests/testing/status_matchers.h"

ABSL_DECLARE_FLAG(std::string, config);
ABSL_DECLARE_FLAG(std::string, listen);
ABSL_DECLARE_FLAG(std::string, log_format);

namespace weightpath::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

class ServerConfigTest : public ::testing::Test {
 protected:
  absl::FlagSaver restore_flags_;
  testing::TempDir dir_;
};

TEST_F(ServerConfigTest, DefaultsAreTheEmbeddedLoopbackSetUp) {
  absl::StatusOr<ServerConfig> config = ServerConfigFromFlags({});
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->listen, "127.0.0.1:50051");
  EXPECT_EQ(config->metrics_listen, "127.0.0.1:9464");
  EXPECT_TRUE(config->policy_path.empty());
  EXPECT_TRUE(config->catalog_path.empty());
  EXPECT_EQ(config->log_format, LogFormat::kText);
  EXPECT_EQ(config->shutdown_grace, absl::Seconds(10));
}

TEST_F(ServerConfigTest, ConfigFileAddsValuesAndTheCommandLineWins) {
  const std::string path = dir_.File("server.yaml");
  testing::WriteFileOrDie(path,
                          "listen: 127.0.0.1:6000\n"
                          "log_format: json\n"
                          "shutdown_grace: 3s\n"
                          "reload_interval: 250ms\n"
                          "policy: /etc/weightpath/policy.yaml\n");
  absl::SetFlag(&FLAGS_config, path);
  absl::SetFlag(&FLAGS_log_format, "text");
  char arg0[] = "weightpath-server";
  char arg1[] = "--log_format=text";
  char* argv[] = {arg0, arg1};
  absl::StatusOr<ServerConfig> config = ServerConfigFromFlags(FlagNamesOnCommandLine(2, argv));
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->listen, "127.0.0.1:6000");
  EXPECT_EQ(config->log_format, LogFormat::kText);
  EXPECT_EQ(config->shutdown_grace, absl::Seconds(3));
  EXPECT_EQ(config->reload_interval, absl::Milliseconds(250));
  EXPECT_EQ(config->policy_path, "/etc/weightpath/policy.yaml");
}

TEST_F(ServerConfigTest, ConfigFileFaultsNameTheLine) {
  const std::string path = dir_.File("server.yaml");
  testing::WriteFileOrDie(path, "listen: 127.0.0.1:6000\nlisten_port: 7\n");
  absl::SetFlag(&FLAGS_config, path);
  EXPECT_THAT(ServerConfigFromFlags({}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("server.yaml:2:1: listen_port: unknown key 'listen_port' "
                                 "(allowed: listen, ")));
  testing::WriteFileOrDie(path, "shutdown_grace: soon\n");
  EXPECT_THAT(ServerConfigFromFlags({}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("server.yaml:1:17: shutdown_grace: ")));
  absl::SetFlag(&FLAGS_config, dir_.File("missing.yaml"));
  EXPECT_THAT(ServerConfigFromFlags({}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing.yaml")));
}

TEST_F(ServerConfigTest, OperatorsAreAListOfNamedIdentitiesWithARole) {
  const std::string path = dir_.File("server.yaml");
  testing::WriteFileOrDie(path,
                          "store: none\n"
                          "operators:\n"
                          "  - {name: alice, role: viewer, token_file: /etc/wp/alice.token}\n"
                          "  - name: release\n"
                          "    role: operator\n"
                          "    certificate: ou=release-team\n");
  absl::SetFlag(&FLAGS_config, path);
  absl::StatusOr<ServerConfig> config = ServerConfigFromFlags({});
  ASSERT_THAT(config, IsOk());
  ASSERT_EQ(config->operators.size(), 2u);
  EXPECT_EQ(config->operators[0].name, "alice");
  EXPECT_EQ(config->operators[0].role, "viewer");
  EXPECT_EQ(config->operators[0].token_file, "/etc/wp/alice.token");
  EXPECT_EQ(config->operators[1].certificate, "ou=release-team");
  EXPECT_THAT(config->operators[1].where, HasSubstr("server.yaml:4: operators[1]"));

  const struct {
    std::string text;
    std::string message;
  } faults[] = {
      {"operators: alice\n", "server.yaml:1:12: operators: expected a list of {name, role, token_file | certificate}, "
       "got a scalar"},
      {"operators:\n  - {name: a, role: root, token_file: /t}\n",
       "server.yaml:2:5: operators[0]: role \"root\" must be viewer, operator or admin"},
      {"operators:\n  - {name: a, role: viewer}\n",
       "operators[0]: needs exactly one of token_file and certificate"},
      {"operators:\n  - {name: a, role: viewer, token_file: /t, certificate: ou=x}\n",
       "operators[0]: needs exactly one of token_file and certificate"},
      {"operators:\n  - {role: viewer, token_file: /t}\n", "operators[0]: needs a name"},
      {"operators:\n  - name: a\n    rol: viewer\n",
       "server.yaml:3:5: operators[0].rol: unknown key 'rol' (allowed: name, role, token_file, "
       "certificate)"},
  };
  for (const auto& fault : faults) {
    testing::WriteFileOrDie(path, fault.text);
    EXPECT_THAT(ServerConfigFromFlags({}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(fault.message)))
        << fault.text;
  }
}

TEST_F(ServerConfigTest, ConfigFileIsBoundedAndMustBeARegularFile) {
  const std::string path = dir_.File("server.yaml");
  // 64 KiB anchored once, repeated by 100 aliases: 6.4 MB once expanded.
  std::string bomb = "listen: &big " + std::string(64 * 1024, 'x') + "\nunused:\n";
  for (int i = 0; i < 100; ++i) bomb += "  - *big\n";
  testing::WriteFileOrDie(path, bomb);
  absl::SetFlag(&FLAGS_config, path);
  EXPECT_THAT(ServerConfigFromFlags({}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("more than 1048576 bytes of text once aliases are expanded")));
  absl::SetFlag(&FLAGS_config, "/dev/zero");
  EXPECT_THAT(ServerConfigFromFlags({}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("/dev/zero: a character device, not a regular file")));
}

TEST_F(ServerConfigTest, FlagNamesOnCommandLineSeesEveryForm) {
  char arg0[] = "weightpath-server";
  char arg1[] = "--listen=0.0.0.0:1";
  char arg2[] = "-policy";
  char arg3[] = "p.yaml";
  char arg4[] = "--noinsecure";
  char arg5[] = "--";
  char arg6[] = "--catalog=x";
  char* argv[] = {arg0, arg1, arg2, arg3, arg4, arg5, arg6};
  const std::set<std::string> names = FlagNamesOnCommandLine(7, argv);
  EXPECT_EQ(names.count("listen"), 1u);
  EXPECT_EQ(names.count("policy"), 1u);
  EXPECT_EQ(names.count("insecure"), 1u);
  EXPECT_EQ(names.count("catalog"), 0u);
}

TEST_F(ServerConfigTest, InconsistentValuesAreRefused) {
  ServerConfig config;
  config.client_ca_path = "ca.pem";
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--client_ca needs")));
  config = ServerConfig();
  config.log_level = "loud";
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--log_level")));
  config = ServerConfig();
  config.shutdown_grace = absl::Seconds(-1);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--shutdown_grace")));
  config = ServerConfig();
  config.registry_queue_capacity = 0;
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--registry_queue_capacity=0")));
  config = ServerConfig();
  config.registry_batch_size = config.registry_queue_capacity + 1;
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("--registry_batch_size=", config.registry_batch_size))));
  config = ServerConfig();
  config.registry_flush_period = absl::ZeroDuration();
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--registry_flush_period=0")));
  config.registry_flush_period = absl::Minutes(2);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--registry_flush_period=2m")));
  config = ServerConfig();
  config.devices_seen_refresh_interval = absl::ZeroDuration();
  EXPECT_THAT(ValidateServerConfig(config), StatusIs(absl::StatusCode::kInvalidArgument,
                                                     HasSubstr("--devices_seen_refresh_interval")));
  config = ServerConfig();
  config.resolve_interval = absl::Seconds(10);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--resolve_interval: 10s is outside 30s..24h")));
  config.resolve_interval = absl::Hours(25);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--resolve_interval: 25h")));
  config.resolve_interval = absl::Minutes(10);
  config.rollout_resolve_interval = absl::Minutes(20);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--rollout_resolve_interval: 20m is outside 30s..--resolve_interval "
                                 "(10m)")));
  config.rollout_resolve_interval = absl::Minutes(2);
  EXPECT_THAT(ValidateServerConfig(config), IsOk());
  config = ServerConfig();
  config.failed_build_retry_interval = absl::Seconds(10);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--failed_build_retry_interval: 10s is outside 1m..24h (0 turns "
                                 "retries off)")));
  config.failed_build_retry_interval = absl::Hours(48);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--failed_build_retry_interval")));
  config.failed_build_retry_interval = absl::ZeroDuration();
  EXPECT_THAT(ValidateServerConfig(config), IsOk());
  config.registry_queue_max_mb = 0;
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--registry_queue_max_mb=0 must be between 1 and 65536")));
  config.registry_queue_max_mb = 256;
  config.drift_persistent_after = absl::ZeroDuration();
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--drift_persistent_after")));
  config = ServerConfig();
  config.device_rate_limit = -1;
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--device_rate_limit=-1")));
  config.device_rate_limit = 5;
  config.device_rate_burst = 0.5;
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--device_rate_burst=0.5")));
  config.device_rate_burst = 20;
  EXPECT_THAT(ValidateServerConfig(config), IsOk());
  config.max_inflight_device_calls = -1;
  EXPECT_THAT(ValidateServerConfig(config), StatusIs(absl::StatusCode::kInvalidArgument,
                                                     HasSubstr("--max_inflight_device_calls=-1")));
}

// The gRPC port's connection limits: zero would refuse every client, and
// a check every few milliseconds would be its own load.
TEST_F(ServerConfigTest, ConnectionLimitsAreBounded) {
  ServerConfig config;
  EXPECT_THAT(ValidateServerConfig(config), IsOk());
  config.handshake_timeout = absl::ZeroDuration();
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--handshake_timeout=0")));
  config = ServerConfig();
  config.max_concurrent_streams = 0;
  EXPECT_THAT(ValidateServerConfig(config), StatusIs(absl::StatusCode::kInvalidArgument,
                                                     HasSubstr("--max_concurrent_streams=0")));
  config = ServerConfig();
  config.max_connections = -1;
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_connections=-1")));
  config = ServerConfig();
  config.grpc_memory_quota_mb = 8;
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--grpc_memory_quota_mb=8")));
  config = ServerConfig();
  config.max_connection_idle = absl::Milliseconds(10);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_connection_idle=10ms")));
  config = ServerConfig();
  config.max_connection_age = absl::ZeroDuration();
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_connection_age=0")));
  // Milliseconds in gRPC's int: 720h would wrap negative (GOAWAY at once).
  config.max_connection_age = absl::Hours(720);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--max_connection_age=720h"), HasSubstr("576h"))));
  config.max_connection_age = absl::Hours(576);
  EXPECT_THAT(ValidateServerConfig(config), IsOk());
  config = ServerConfig();
  config.max_connection_idle = absl::Hours(600);
  EXPECT_THAT(ValidateServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_connection_idle=600h")));
  config = ServerConfig();
  config.listener_check_interval = absl::Milliseconds(5);
  EXPECT_THAT(ValidateServerConfig(config), StatusIs(absl::StatusCode::kInvalidArgument,
                                                     HasSubstr("--listener_check_interval=5ms")));
  config.listener_check_interval = absl::ZeroDuration();
  EXPECT_THAT(ValidateServerConfig(config), IsOk());
}

// What the start-up errors and warnings print of --store: the password
// never, wherever libpq would take it from; the rest as given.
TEST(StoreUrlText, PasswordsAreMaskedAndTheRestKept) {
  using store::RedactedStoreUrl;
  EXPECT_EQ(RedactedStoreUrl("postgres://wp:s3cret@db.internal:5432/fleet"),
            "postgres://wp:***@db.internal:5432/fleet");
  EXPECT_EQ(RedactedStoreUrl("postgresql://wp:p@ss@db/fleet?sslmode=require"),
            "postgresql://wp:***@db/fleet?sslmode=require");
  EXPECT_EQ(RedactedStoreUrl("postgres://db/fleet?user=wp&password=s3cret&sslmode=require"),
            "postgres://db/fleet?user=wp&password=***&sslmode=require");
  EXPECT_EQ(RedactedStoreUrl("postgres://db/fleet?password=s3cret"),
            "postgres://db/fleet?password=***");
  EXPECT_EQ(RedactedStoreUrl("postgres://db/fleet?sslpassword=key"),
            "postgres://db/fleet?sslpassword=key");
  EXPECT_EQ(RedactedStoreUrl("postgres://wp@db/fleet"), "postgres://wp@db/fleet");
  EXPECT_EQ(RedactedStoreUrl("sqlite:/var/lib/weightpath-server/fleet.db"),
            "sqlite:/var/lib/weightpath-server/fleet.db");
  EXPECT_EQ(RedactedStoreUrl("none"), "none");
}

}  // namespace
}  // namespace weightpath::server
