#include "agent/config/agent_config.h"

#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteTextFile;
using weightpath::testing::IsOk;
using weightpath::testing::StatusIs;

constexpr char kFullConfig[] = R"(server: fleet.example.net:443
tls:
  ca: /etc/weightpath/ca.pem
  cert: /etc/weightpath/device.pem
  key: /etc/weightpath/device.key
device_id: edge-0042
model: Spark-X2.5-1.7B
priority: fidelity
labels:
  workload: agentic
  site: berlin
state_dir: /var/lib/wp
cache_dir: /var/cache/wp
decision_file: /run/wp/decision.json
env_file: /run/wp/engine.env
budget: 20
call_timeout: 500ms
retry_base_delay: 0.1
retry_max_delay: 4s
)";

TEST(AgentConfig, ParsesEveryKey) {
  absl::StatusOr<AgentConfig> config = ParseAgentConfig(kFullConfig, "agent.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->server, "fleet.example.net:443");
  ASSERT_TRUE(config->tls.has_value());
  EXPECT_EQ(config->tls->ca, "/etc/weightpath/ca.pem");
  EXPECT_EQ(config->tls->cert, "/etc/weightpath/device.pem");
  EXPECT_EQ(config->tls->key, "/etc/weightpath/device.key");
  EXPECT_EQ(config->device_id, "edge-0042");
  EXPECT_EQ(config->model, "Spark-X2.5-1.7B");
  EXPECT_EQ(config->priority, v1::PRIORITY_FIDELITY);
  EXPECT_EQ(config->labels.at("workload"), "agentic");
  EXPECT_EQ(config->labels.at("site"), "berlin");
  EXPECT_EQ(config->state_dir, "/var/lib/wp");
  EXPECT_EQ(config->cache_dir, "/var/cache/wp");
  EXPECT_EQ(config->decision_file, "/run/wp/decision.json");
  EXPECT_EQ(config->env_file, "/run/wp/engine.env");
  EXPECT_EQ(config->budget, absl::Seconds(20));
  EXPECT_EQ(config->call_timeout, absl::Milliseconds(500));
  EXPECT_EQ(config->retry_base_delay, absl::Milliseconds(100));
  EXPECT_EQ(config->retry_max_delay, absl::Seconds(4));
}

TEST(AgentConfig, MinimalConfigTakesDefaults) {
  absl::StatusOr<AgentConfig> config =
      ParseAgentConfig("server: 127.0.0.1:50051\ndevice_id: d1\n", "agent.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_FALSE(config->tls.has_value());
  EXPECT_EQ(config->priority, v1::PRIORITY_SPEED);
  EXPECT_EQ(config->state_dir, "/var/lib/weightpath");
  EXPECT_EQ(config->budget, absl::Seconds(30));
  EXPECT_EQ(config->call_timeout, absl::Seconds(5));
}

TEST(AgentConfig, ArtifactMirrorsAreOrderedBaseUrls) {
  absl::StatusOr<AgentConfig> config = ParseAgentConfig(
      "server: a:1\ndevice_id: d\nmirror_stall_timeout: 3s\nartifact_mirrors:\n"
      "  - http://site-cache.local:8470/\n  - https://mirror.example/weightpath\n",
      "agent.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->artifact_mirrors,
            (std::vector<std::string>{"http://site-cache.local:8470",
                                      "https://mirror.example/weightpath"}));
  EXPECT_EQ(config->mirror_stall_timeout, absl::Seconds(3));
  absl::StatusOr<AgentConfig> none = ParseAgentConfig("server: a:1\ndevice_id: d\n", "agent.yaml");
  ASSERT_THAT(none, IsOk());
  EXPECT_TRUE(none->artifact_mirrors.empty());
  EXPECT_EQ(none->mirror_stall_timeout, absl::Seconds(10));
}

TEST(AgentConfig, ArtifactMirrorsRefusedNameTheLineAndKey) {
  std::string nine = "artifact_mirrors:\n";
  for (int i = 0; i < 9; ++i) absl::StrAppend(&nine, "  - http://m", i, "\n");
  for (const auto& [yaml, why] : std::vector<std::pair<std::string, std::string>>{
           {"artifact_mirrors:\n  - ftp://m.example\n", "http:// or https://"},
           {"artifact_mirrors:\n  - file:///srv/blobs\n", "http:// or https://"},
           {"artifact_mirrors:\n  - http://m.example/?token=1\n", "query"},
           {"artifact_mirrors:\n  - http://m.example/#x\n", "fragment"},
           {"artifact_mirrors:\n  - http://user:pw@m.example\n", "user information"},
           {"artifact_mirrors:\n  - http:///blobs\n", "needs a host"},
           {"artifact_mirrors:\n  - \"http://m.example/a b\"\n", "whitespace"},
           {"artifact_mirrors:\n  - http://m.example/" + std::string(2100, 'a') + "\n", "longer than 2048"},
           {"artifact_mirrors: http://m.example\n", "list"},
           {nine, "at most 8 mirrors"},
           {"mirror_stall_timeout: 500ms\n", "at least 1s"},
       }) {
    SCOPED_TRACE(yaml);
    EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\n" + yaml, "agent.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("agent.yaml:"), HasSubstr(yaml.substr(0, yaml.find(':'))),
                               HasSubstr(why))));
  }
}

TEST(AgentConfig, UnknownKeyNamesFileLineAndKey) {
  EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\nbugdet: 10\n", "/etc/wp/agent.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("/etc/wp/agent.yaml:3"), HasSubstr("bugdet"),
                             HasSubstr("unknown key"))));
}

TEST(AgentConfig, UnknownTlsKeyNamesTheNestedKey) {
  EXPECT_THAT(
      ParseAgentConfig("server: a:1\ndevice_id: d\ntls:\n  ca: /ca.pem\n  crt: /c.pem\n",
                       "agent.yaml"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("agent.yaml:5"), HasSubstr("tls.crt"))));
}

TEST(AgentConfig, ServerIsRequired) {
  EXPECT_THAT(ParseAgentConfig("device_id: d\n", "agent.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("server: required")));
}

TEST(AgentConfig, BadPriorityNamesLineAndValue) {
  EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\npriority: fastest\n", "agent.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("agent.yaml:3"), HasSubstr("priority"),
                             HasSubstr("fastest"))));
}

TEST(AgentConfig, DurationsMustBePositiveAndReadable) {
  for (const char* bad : {"budget: 0", "budget: -3", "budget: soon", "call_timeout: 0ms",
                          "retry_max_delay: [1]"}) {
    const std::string text = std::string("server: a:1\ndevice_id: d\n") + bad + "\n";
    const std::string key = std::string(bad).substr(0, std::string(bad).find(':'));
    EXPECT_THAT(ParseAgentConfig(text, "agent.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("agent.yaml:3"), HasSubstr(key))))
        << bad;
  }
}

TEST(AgentConfig, RetryBaseMayNotExceedItsCap) {
  EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\nretry_base_delay: 5\nretry_max_delay: 1\n",
                               "agent.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("retry_base_delay")));
}

// The bounds on the server's resolve_interval_seconds: documented defaults,
// settable, and the config's own interval must lie within them.
TEST(AgentConfig, ResolveIntervalBoundsHaveDefaultsAndMustHoldTogether) {
  absl::StatusOr<AgentConfig> defaults = ParseAgentConfig("server: a:1\ndevice_id: d\n", "a.yaml");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->min_resolve_interval, absl::Seconds(30));
  EXPECT_EQ(defaults->max_resolve_interval, absl::Hours(24));
  EXPECT_EQ(defaults->resolve_interval, absl::Minutes(5));
  EXPECT_EQ(defaults->cache_reserve_bytes, uint64_t{32} << 20);

  absl::StatusOr<AgentConfig> set = ParseAgentConfig(
      "server: a:1\ndevice_id: d\nmin_resolve_interval: 1m\nmax_resolve_interval: 2m\n"
      "cache_reserve_bytes: 0\n",
      "a.yaml");
  ASSERT_THAT(set, IsOk());
  EXPECT_EQ(set->min_resolve_interval, absl::Minutes(1));
  EXPECT_EQ(set->max_resolve_interval, absl::Minutes(2));
  EXPECT_EQ(set->resolve_interval, absl::Minutes(2)) << "the default follows the bounds";
  EXPECT_EQ(set->cache_reserve_bytes, 0u);

  EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\nmin_resolve_interval: 2h\n"
                               "max_resolve_interval: 1h\n",
                               "a.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("a.yaml:3"), HasSubstr("min_resolve_interval must not "
                                                              "exceed max_resolve_interval"))));
  EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\nmin_resolve_interval: 30s\n"
                               "resolve_interval: 1s\n",
                               "a.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("a.yaml:4"), HasSubstr("resolve_interval"),
                             HasSubstr("must lie between min_resolve_interval (30s)"))));
  // A config from before the bounds (no min/max given) still loads: its own
  // interval widens the default bounds, so boot never stops on it.
  for (const auto& [text, interval] : std::vector<std::pair<std::string, absl::Duration>>{
           {"10s", absl::Seconds(10)}, {"48h", absl::Hours(48)}}) {
    absl::StatusOr<AgentConfig> old = ParseAgentConfig(
        "server: a:1\ndevice_id: d\nresolve_interval: " + text + "\n", "a.yaml");
    ASSERT_THAT(old, IsOk()) << text;
    EXPECT_EQ(old->resolve_interval, interval);
    EXPECT_LE(old->min_resolve_interval, interval);
    EXPECT_GE(old->max_resolve_interval, interval);
  }
  EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\ncache_reserve_bytes: -1\n", "a.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("a.yaml:3"), HasSubstr("cache_reserve_bytes"))));
}

// The build cache's keys (agent/fetch/build_cache.h): defaults, values,
// bounds, and cache_reserve_bytes as the older name of cache_min_free_bytes.
TEST(AgentConfig, BuildCacheKeys) {
  absl::StatusOr<AgentConfig> defaults = ParseAgentConfig("server: a:1\ndevice_id: d\n", "a.yaml");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->cache_max_bytes, 0u);
  EXPECT_EQ(defaults->parallel_downloads, 4);
  EXPECT_EQ(defaults->max_download_rate, 0u);
  absl::StatusOr<AgentConfig> set = ParseAgentConfig(
      "server: a:1\ndevice_id: d\ncache_max_bytes: 8000000000\ncache_min_free_bytes: 1048576\n"
      "parallel_downloads: 16\nmax_download_rate: 1250000\n",
      "a.yaml");
  ASSERT_THAT(set, IsOk());
  EXPECT_EQ(set->cache_max_bytes, 8000000000u);
  EXPECT_EQ(set->cache_reserve_bytes, 1048576u);
  EXPECT_EQ(set->parallel_downloads, 16);
  EXPECT_EQ(set->max_download_rate, 1250000u);
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {"parallel_downloads: 0", "parallel_downloads"},
           {"parallel_downloads: 17", "parallel_downloads"},
           {"max_download_rate: -1", "max_download_rate"},
           {"cache_max_bytes: lots", "cache_max_bytes"},
           {"cache_min_free_bytes: -5", "cache_min_free_bytes"}}) {
    EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\n" + text + "\n", "a.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("a.yaml:3"), HasSubstr(key))))
        << text;
  }
  EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\ncache_min_free_bytes: 1\n"
                               "cache_reserve_bytes: 2\n",
                               "a.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("a.yaml:4"), HasSubstr("cache_reserve_bytes is the older "
                                                              "name of cache_min_free_bytes"))));
}

TEST(AgentConfig, TlsCertWithoutKeyIsRefused) {
  EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\ntls:\n  cert: /c.pem\n", "agent.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("tls.key"), HasSubstr("together"))));
}

TEST(AgentConfig, LabelValuesMustBeStrings) {
  EXPECT_THAT(ParseAgentConfig("server: a:1\ndevice_id: d\nlabels:\n  workload: {a: b}\n",
                               "agent.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("agent.yaml:4"), HasSubstr("labels.workload"))));
}

TEST(AgentConfig, MalformedYamlNamesTheLine) {
  EXPECT_THAT(ParseAgentConfig("server: a:1\nlabels: [unclosed\n", "agent.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("agent.yaml:"), HasSubstr("not valid YAML"))));
}

TEST(AgentConfig, AliasesCountAgainstTheSizeLimit) {
  // 64 KiB anchored once, repeated by 100 aliases: 6.4 MB once expanded.
  std::string text = "server: a:1\ndevice_id: d\nmodel: &big " + std::string(64 * 1024, 'm') +
                     "\nlabels:\n";
  for (int i = 0; i < 100; ++i) text += "  l" + std::to_string(i) + ": *big\n";
  EXPECT_THAT(ParseAgentConfig(text, "agent.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("agent.yaml:"),
                             HasSubstr("bytes of text once aliases are expanded"))));
}

TEST(AgentConfig, DocumentMustBeAMap) {
  EXPECT_THAT(ParseAgentConfig("- server\n", "agent.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be a YAML map")));
}

TEST(AgentConfig, DeviceIdDefaultsToMachineIdUnderTheRoot) {
  TempDir root;
  WriteTextFile(root.Sub("etc/machine-id"), "4c4c4544004e3610804fb4c04f333432\n");
  absl::StatusOr<AgentConfig> config = ParseAgentConfig("server: a:1\n", "agent.yaml", root.path());
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->device_id, "4c4c4544004e3610804fb4c04f333432");
}

TEST(AgentConfig, MissingMachineIdIsAFailedPreconditionNamingDeviceId) {
  TempDir root;
  EXPECT_THAT(ParseAgentConfig("server: a:1\n", "agent.yaml", root.path()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("device_id"), HasSubstr("etc/machine-id"))));
}

TEST(AgentConfig, EmptyMachineIdIsRefused) {
  TempDir root;
  WriteTextFile(root.Sub("etc/machine-id"), "\n");
  EXPECT_THAT(ParseAgentConfig("server: a:1\n", "agent.yaml", root.path()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is empty")));
}

TEST(AgentConfig, LoadReportsAMissingFile) {
  TempDir dir;
  EXPECT_THAT(LoadAgentConfig(dir.Sub("absent.yaml")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("absent.yaml")));
}

TEST(AgentConfig, LoadUsesThePathInErrors) {
  TempDir dir;
  WriteTextFile(dir.Sub("agent.yaml"), "server: a:1\ndevice_id: d\nstate_dir: ''\n");
  EXPECT_THAT(LoadAgentConfig(dir.Sub("agent.yaml")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(dir.Sub("agent.yaml:3")), HasSubstr("state_dir"))));
}

// A config path naming a FIFO used to hang the boot in open(); /dev/zero
// used to abort it with bad_alloc. Both are errors naming the path.
TEST(AgentConfig, LoadRefusesWhatIsNotASmallRegularFile) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.Sub("agent.yaml").c_str(), 0600), 0);
  EXPECT_THAT(LoadAgentConfig(dir.Sub("agent.yaml")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(dir.Sub("agent.yaml")), HasSubstr("a FIFO"))));
  EXPECT_THAT(LoadAgentConfig("/dev/zero"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a character device")));
  WriteTextFile(dir.Sub("big.yaml"), "server: x:1\n# " + std::string(2 << 20, 'x') + "\n");
  EXPECT_THAT(LoadAgentConfig(dir.Sub("big.yaml")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("larger than the limit")));
}

}  // namespace
}  // namespace weightpath::agent
