// `weightpath-agent boot` as a device runs it: the real agent binary, the
// real weightpath-server and a real HTTP server, all on loopback.
#include <fcntl.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/decision/decision_record.h"
#include "agent/report/outcome_report.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/canned_http_server.h"
#include "tests/agent/engine_unit.h"
#include "tests/agent/range_http_server.h"
#include "tests/agent/temp_dir.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"
#include "tests/server/test_ca.h"
#include "tests/store/sqlite_file_connection.h"
#include "tests/support/subprocess.h"
#include "tests/testing/status_matchers.h"

#ifndef WEIGHTPATH_AGENT_BINARY
#error "the test target defines WEIGHTPATH_AGENT_BINARY"
#endif

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using testing::ArtifactBytes;
using server::testing::ServerProcess;
using testing::RangeHttpServer;
using testing::ReadTextFile;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;
using testing::TempDir;
using testing::WriteArtifact;
using testing::WriteTextFile;
using weightpath::testing::IsOk;

namespace fs = std::filesystem;

constexpr char kModel[] = "Spark-X2.5-1.7B";
constexpr size_t kArtifactBytes = 256 * 1024;
// The fallback budget (4 s, kFallbackTiming) plus process start, probe and
// hand-over on a loaded 2-core CI machine. Without per-call deadlines a
// call to a silent server would wait until the test's 60 s kill.
constexpr absl::Duration kProcessSlack = absl::Seconds(5);
constexpr char kServerTiming[] = "budget: 30\ncall_timeout: 10\n";
constexpr char kFallbackTiming[] = "budget: 4\ncall_timeout: 1\n";
// An x86 server CPU with AMX: the default policy gives it w4a8-amx for speed.
constexpr char kProfileJson[] = R"({
  "arch": "x86_64",
  "cpu_model": "Intel(R) Xeon(R) Platinum 8480C",
  "cpu_flags": ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "amx_int8", "fma", "f16c"],
  "n_logical": 8,
  "n_physical": 4,
  "numa_nodes": 1,
  "ram_total_bytes": 34359738368,
  "ram_available_bytes": 30000000000,
  "accelerator": "none",
  "supports_bf16": true,
  "host_os": "linux"
})";

// How often the agent logged a failed ResolveWeightPath attempt.
int ResolveAttempts(const std::string& agent_log) {
  int attempts = 0;
  for (absl::string_view line : absl::StrSplit(agent_log, '\n')) {
    if (absl::StrContains(line, "resolve attempt failed")) ++attempts;
  }
  return attempts;
}

// A loopback port nothing listens on (bound, read, released).
int UnusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

class AgentBootEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(served());
    absl::StatusOr<std::unique_ptr<RangeHttpServer>> http =
        RangeHttpServer::Start(served(), work_.path());
    ASSERT_THAT(http, IsOk());
    http_ = *std::move(http);

    // One artifact per path the default policy can hand out, so the server
    // accepts the catalog; only the one this device gets is ever fetched.
    const std::shared_ptr<const policy::Policy> default_policy = policy::DefaultPolicy();
    uint32_t seed = 1;
    for (const std::string& name : default_policy->ReachablePathNames()) {
      artifacts_[name] = WriteArtifact(served() + "/" + name + ".bin",
                                       ArtifactBytes(kArtifactBytes, seed++),
                                       http_->Url(name + ".bin"));
    }
    WriteTextFile(profile_path(), kProfileJson);
    v1::HardwareProfile profile;
    profile.set_arch("x86_64");
    for (const char* flag : {"avx2", "avx512f", "amx_bf16", "amx_tile", "amx_int8"}) {
      profile.add_cpu_flags(flag);
    }
    profile.set_accelerator("none");
    absl::StatusOr<policy::Decision> decision =
        policy::Evaluate(*default_policy, profile, v1::PRIORITY_SPEED, {});
    ASSERT_THAT(decision, IsOk());
    expected_path_ = decision->path->name;
    WriteCatalog(catalog_path(), {});
  }

  std::string served() const { return work_.Sub("served"); }
  std::string device(const std::string& relative) const { return work_.Sub("device/" + relative); }
  std::string profile_path() const { return work_.Sub("profile.json"); }
  std::string catalog_path() const { return work_.Sub("catalog.yaml"); }
  const v1::Artifact& expected_artifact() const { return artifacts_.at(expected_path_); }
  std::string cached_artifact() const {
    return device("cache/" + expected_artifact().sha256());
  }

  // `uri_overrides`: path name -> the URI the catalog gives for it.
  void WriteCatalog(const std::string& path, const std::map<std::string, std::string>& uri_overrides) {
    std::string yaml = absl::StrCat("default_model: ", kModel, "\nmodels:\n  ", kModel, ":\n");
    for (const auto& [name, artifact] : artifacts_) {
      const auto override_uri = uri_overrides.find(name);
      absl::StrAppend(&yaml, "    ", name, ":\n      uri: \"",
                      override_uri == uri_overrides.end() ? artifact.uri() : override_uri->second,
                      "\"\n      sha256: ", artifact.sha256(), "\n      size_bytes: ",
                      artifact.size_bytes(), "\n      version: \"", artifact.version(), "\"\n");
    }
    WriteTextFile(path, yaml);
  }

  // Starts weightpath-server on a free loopback port; returns host:port.
  std::string StartServer(const std::string& catalog,
                          const std::vector<std::string>& extra_flags = {}) {
    std::vector<std::string> args = {"--catalog=" + catalog, "--reload_interval=0s"};
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(args);
    EXPECT_THAT(server, IsOk());
    if (!server.ok()) return "";
    server_ = *std::move(server);
    return server_->grpc_address();
  }

  void StopServer() { server_.reset(); }

  // `timing`: two lines, budget and call_timeout. Boots expected to reach
  // the server get room for a slow TLS handshake on a loaded machine;
  // boots expected to fall back get kFallbackTiming, which the time bounds
  // below assume.
  void WriteAgentConfig(const std::string& server_address, const std::string& extra = "",
                        const std::string& timing = kServerTiming) {
    WriteTextFile(device("agent.yaml"),
                  absl::StrCat("server: ", server_address, "\n",
                               "device_id: edge-test-0001\n",
                               "priority: speed\n",
                               "labels:\n  workload: agentic\n",
                               "state_dir: ", device("state"), "\n",
                               "cache_dir: ", device("cache"), "\n",
                               "decision_file: ", device("run/decision.json"), "\n",
                               "env_file: ", device("run/engine.env"), "\n",
                               timing,
                               "retry_base_delay: 100ms\n",
                               "retry_max_delay: 500ms\n", fixture_config_, extra));
  }

  ProcessResult Boot() {
    ProcessResult result =
        RunProcess({WEIGHTPATH_AGENT_BINARY, "boot", "--config", device("agent.yaml")},
                   {{"WEIGHTPATH_HW_PROFILE", profile_path()}}, absl::Seconds(60));
    return result;
  }

  DecisionRecord Decision() const {
    absl::StatusOr<DecisionRecord> record =
        DecisionFromJson(ReadTextFile(device("run/decision.json")), "decision.json");
    EXPECT_THAT(record, IsOk());
    return record.ok() ? *record : DecisionRecord{};
  }

  // Lines of the request log that fetched the expected artifact.
  int ArtifactRequests() const {
    const std::vector<std::string> log = http_->RequestLog();
    return static_cast<int>(std::count_if(log.begin(), log.end(), [&](const std::string& line) {
      return absl::StrContains(line, "/" + expected_path_ + ".bin");
    }));
  }

  // Sources engine.env in sh and prints one variable.
  std::string EnvVariable(const std::string& name) const {
    ProcessResult shell = RunProcess(
        {"/bin/sh", "-c", ". \"$1\" && printf '%s' \"$" + name + "\"", "sh",
         device("run/engine.env")},
        {}, absl::Seconds(10));
    EXPECT_EQ(shell.exit_code, 0) << shell.err;
    return shell.out;
  }

  // Keys every config of a fixture adds.
  std::string fixture_config_;
  TempDir work_;
  std::unique_ptr<RangeHttpServer> http_;
  std::unique_ptr<ServerProcess> server_;
  std::map<std::string, v1::Artifact> artifacts_;
  std::string expected_path_;
};

TEST_F(AgentBootEndToEnd, ResolvesDownloadsVerifiesAndHandsOver) {
  WriteAgentConfig(StartServer(catalog_path()));
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  EXPECT_THAT(boot.err, HasSubstr("decision from the server"));

  const DecisionRecord decision = Decision();
  EXPECT_EQ(decision.source, DecisionSource::kServer);
  EXPECT_EQ(decision.response.weight_path().name(), expected_path_);
  EXPECT_EQ(decision.response.artifact().sha256(), expected_artifact().sha256());
  EXPECT_EQ(decision.artifact_path, cached_artifact());
  EXPECT_EQ(ReadTextFile(cached_artifact()),
            ReadTextFile(served() + "/" + expected_path_ + ".bin"));
  EXPECT_EQ(ArtifactRequests(), 1);

  EXPECT_EQ(EnvVariable("WEIGHTPATH_SOURCE"), "server");
  EXPECT_EQ(EnvVariable("WEIGHTPATH_PATH"), expected_path_);
  EXPECT_EQ(EnvVariable("WEIGHTPATH_ARTIFACT"), cached_artifact());
  EXPECT_EQ(EnvVariable("WEIGHTPATH_QUANTIZATION"), decision.response.weight_path().quantization());
  EXPECT_THAT(EnvVariable("WEIGHTPATH_ENGINE_ARGS"), HasSubstr("--model " + cached_artifact()));
  EXPECT_TRUE(fs::exists(device("state/last_good_decision.json")));
}

TEST_F(AgentBootEndToEnd, SecondBootDoesNotDownloadAgain) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  const fs::file_time_type saved_at = fs::last_write_time(device("state/last_good_decision.json"));
  const ProcessResult second = Boot();
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.err, HasSubstr("already cached and verified"));
  EXPECT_EQ(ArtifactRequests(), 1);
  EXPECT_EQ(Decision().artifact_path, cached_artifact());
  // The same decision again: the stored copy is not rewritten.
  EXPECT_EQ(fs::last_write_time(device("state/last_good_decision.json")), saved_at);
}

TEST_F(AgentBootEndToEnd, SecondBootIsAnsweredUnchangedAndRewritesNothing) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  const DecisionRecord first = Decision();
  ASSERT_EQ(first.response.decision_etag().size(), 32u);
  const fs::file_time_type decision_at = fs::last_write_time(device("run/decision.json"));
  const std::string decision_text = ReadTextFile(device("run/decision.json"));
  const fs::file_time_type env_at = fs::last_write_time(device("run/engine.env"));

  const ProcessResult second = Boot();
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.err, HasSubstr("server kept path " + expected_path_));
  EXPECT_EQ(fs::last_write_time(device("run/decision.json")), decision_at);
  EXPECT_EQ(ReadTextFile(device("run/decision.json")), decision_text);
  EXPECT_EQ(fs::last_write_time(device("run/engine.env")), env_at);
  const DecisionRecord kept = Decision();
  EXPECT_EQ(kept.response.decision_etag(), first.response.decision_etag());
  EXPECT_EQ(kept.response.weight_path().name(), expected_path_);
  EXPECT_FALSE(kept.response.unchanged());

  // A new artifact in the catalog is a new decision: handed over in full.
  StopServer();
  WriteTextFile(catalog_path(), absl::StrReplaceAll(ReadTextFile(catalog_path()),
                                                    {{"version: \"", "version: \"next-"}}));
  WriteAgentConfig(StartServer(catalog_path()));
  const ProcessResult third = Boot();
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_THAT(third.err, HasSubstr("server chose path " + expected_path_));
  EXPECT_NE(Decision().response.decision_etag(), first.response.decision_etag());
  EXPECT_THAT(Decision().response.artifact().version(), ::testing::StartsWith("next-"));
}

TEST_F(AgentBootEndToEnd, ServerDownFallsBackToTheLastGoodDecisionWithinBudget) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  const std::string address = absl::StrCat("127.0.0.1:", UnusedPort());
  StopServer();
  WriteAgentConfig(address, "", kFallbackTiming);

  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_LT(boot.wall_time, absl::Seconds(4) + kProcessSlack);
  EXPECT_THAT(boot.err, HasSubstr("using the last good decision"));
  EXPECT_GE(ResolveAttempts(boot.err), 2) << "unavailable is retried";
  const DecisionRecord decision = Decision();
  EXPECT_EQ(decision.source, DecisionSource::kLastGood);
  EXPECT_EQ(decision.response.weight_path().name(), expected_path_);
  EXPECT_EQ(decision.artifact_path, cached_artifact());
  EXPECT_EQ(EnvVariable("WEIGHTPATH_SOURCE"), "last_good");
  EXPECT_EQ(ArtifactRequests(), 1);
}

TEST_F(AgentBootEndToEnd, FreshDeviceWithoutServerGetsTheOfflinePolicy) {
  WriteAgentConfig(absl::StrCat("127.0.0.1:", UnusedPort()), "", kFallbackTiming);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 4) << boot.err;
  EXPECT_LT(boot.wall_time, absl::Seconds(4) + kProcessSlack);
  EXPECT_THAT(boot.err, HasSubstr("offline decision from the default policy"));
  const DecisionRecord decision = Decision();
  EXPECT_EQ(decision.source, DecisionSource::kOffline);
  EXPECT_EQ(decision.response.weight_path().name(), expected_path_);
  EXPECT_EQ(decision.response.weight_path().verification().source(),
            v1::Verification::SOURCE_NONE);
  EXPECT_EQ(decision.artifact_path, "");
  EXPECT_EQ(EnvVariable("WEIGHTPATH_SOURCE"), "offline");
  EXPECT_EQ(EnvVariable("WEIGHTPATH_PATH"), expected_path_);
  EXPECT_EQ(EnvVariable("WEIGHTPATH_ARTIFACT"), "");
  EXPECT_FALSE(fs::exists(device("state/last_good_decision.json")));
}

// weightpath_agent_boots_total{outcome="boot_ok",source=SOURCE} on the
// running server; -1 when it cannot be read.
double BootsCounted(const ServerProcess& server, const std::string& source) {
  absl::StatusOr<std::string> metrics = server::testing::HttpGet(server.metrics_address(), "/metrics");
  if (!metrics.ok()) return -1;
  absl::StatusOr<double> value = server::testing::SampleValue(
      *metrics, absl::StrCat("weightpath_agent_boots_total{outcome=\"boot_ok\",source=\"", source,
                             "\"}"));
  return value.ok() ? *value : -1;
}

// A boot is reported with where its decision came from. One that fell back
// (the server down) waits in state_dir and is sent by the next boot that
// reaches a server; every source's series is there at 0 before any boot.
TEST_F(AgentBootEndToEnd, BootsAreCountedBySourceAndAFallbackBootOnceTheServerIsBack) {
  WriteAgentConfig(StartServer(catalog_path()));
  for (const char* source : {"server", "last_good", "offline", "unspecified"}) {
    EXPECT_EQ(BootsCounted(*server_, source), 0) << source;
  }
  const ProcessResult first = Boot();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(BootsCounted(*server_, "server"), 1);
  EXPECT_FALSE(fs::exists(device("state/pending_reports.jsonl")));

  StopServer();
  WriteAgentConfig(absl::StrCat("127.0.0.1:", UnusedPort()), "", kFallbackTiming);
  const ProcessResult fallback = Boot();
  ASSERT_EQ(fallback.exit_code, 3) << fallback.err;
  EXPECT_THAT(fallback.err, HasSubstr("kept in " + device("state/pending_reports.jsonl")));
  EXPECT_THAT(ReadTextFile(device("state/pending_reports.jsonl")),
              HasSubstr("\"bootSource\":\"BOOT_SOURCE_LAST_GOOD\""));

  WriteAgentConfig(StartServer(catalog_path()));
  const ProcessResult back = Boot();
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(BootsCounted(*server_, "last_good"), 1);
  EXPECT_EQ(BootsCounted(*server_, "server"), 1);
  EXPECT_EQ(BootsCounted(*server_, "offline"), 0);
  EXPECT_FALSE(fs::exists(device("state/pending_reports.jsonl")));
}

// The engine unit's failure hook: `outcome --outcome boot_failed` says the
// decision in decision_file could not boot, with where it came from.
TEST_F(AgentBootEndToEnd, ABootFailureIsReportedWithTheDecisionsSource) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  const auto failed_boots = [&] {
    absl::StatusOr<std::string> metrics =
        server::testing::HttpGet(server_->metrics_address(), "/metrics");
    if (!metrics.ok()) return -1.0;
    return server::testing::SampleValue(
               *metrics, "weightpath_agent_boots_total{outcome=\"boot_failed\",source=\"server\"}")
        .value_or(-1);
  };
  EXPECT_EQ(failed_boots(), 0);
  const ProcessResult reported = RunProcess(
      {WEIGHTPATH_AGENT_BINARY, "outcome", "--config", device("agent.yaml"), "--outcome",
       "boot_failed", "--detail", "vllm exited 1"},
      {}, absl::Seconds(60));
  ASSERT_EQ(reported.exit_code, 0) << reported.err;
  EXPECT_THAT(reported.out, HasSubstr("reported OUTCOME_BOOT_FAILED"));
  EXPECT_EQ(failed_boots(), 1);

  const ProcessResult unknown = RunProcess(
      {WEIGHTPATH_AGENT_BINARY, "outcome", "--config", device("agent.yaml"), "--outcome", "boot_ok"},
      {}, absl::Seconds(60));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("is not one of engine_started, engine_start_failed, tasks, "
                                     "boot_failed"));
}

// `run` sends what an offline boot could not, with its first pass.
TEST_F(AgentBootEndToEnd, AnOfflineBootIsReportedByTheRunLoopOnceTheServerAnswers) {
  WriteAgentConfig(absl::StrCat("127.0.0.1:", UnusedPort()), "", kFallbackTiming);
  ASSERT_EQ(Boot().exit_code, 4);
  ASSERT_TRUE(fs::exists(device("state/pending_reports.jsonl")));
  const std::string pending = ReadTextFile(device("state/pending_reports.jsonl"));

  // A pass that cannot reach the server either keeps the report on disk: a
  // loop stopped or killed before the server answers loses nothing.
  const ProcessResult unreachable =
      RunProcess({WEIGHTPATH_AGENT_BINARY, "run", "--once", "--config", device("agent.yaml")},
                 {{"WEIGHTPATH_HW_PROFILE", profile_path()}}, absl::Seconds(60));
  EXPECT_NE(unreachable.exit_code, 0) << unreachable.err;
  ASSERT_TRUE(fs::exists(device("state/pending_reports.jsonl")));
  EXPECT_EQ(ReadTextFile(device("state/pending_reports.jsonl")), pending);

  WriteAgentConfig(StartServer(catalog_path()));
  const ProcessResult run =
      RunProcess({WEIGHTPATH_AGENT_BINARY, "run", "--once", "--config", device("agent.yaml")},
                 {{"WEIGHTPATH_HW_PROFILE", profile_path()}}, absl::Seconds(60));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(BootsCounted(*server_, "offline"), 1);
  EXPECT_EQ(BootsCounted(*server_, "server"), 0);
  EXPECT_FALSE(fs::exists(device("state/pending_reports.jsonl")));
}

std::string AllDevices(v1::FleetAdmin::Stub& admin) {
  v1::ListDevicesResponse all;
  const grpc::Status listed = admin.ListDevices(server::testing::AdminContext().get(), {}, &all);
  return absl::StrCat(listed.error_message(), "\n", all.DebugString());
}

// What a rolled-back device runs is what the registry shows beside its
// assignment: the engine's env file names the old build, and so do
// ListDevices (drifted_only), FleetSummary's running counts and
// weightpath_devices_drifted, until the device runs what it is assigned.
TEST_F(AgentBootEndToEnd, ADeviceThatRolledBackShowsAsDriftingUntilItRunsItsAssignment) {
  server::testing::WriteSecretFileOrDie(work_.Sub("token"),
                                        std::string(server::testing::kAdminToken) + "\n");
  const std::string address = StartServer(
      catalog_path(), {"--admin_token_file=" + work_.Sub("token"), "--fleet_refresh_interval=100ms",
                       "--devices_seen_refresh_interval=100ms", "--registry_flush_period=50ms"});
  // The "engine" starts only the build the device booted.
  WriteTextFile(work_.Sub("apply.sh"),
                absl::StrCat("#!/bin/sh\n. ", device("run/engine.env"), "\n[ \"$WEIGHTPATH_PATH\" = ",
                             expected_path_, " ] || exit 3\n"));
  ::chmod(work_.Sub("apply.sh").c_str(), 0755);
  WriteAgentConfig(address, absl::StrCat("apply_command: ", work_.Sub("apply.sh"), "\n"));
  ASSERT_EQ(Boot().exit_code, 0);

  // Fidelity is another build on this CPU: assigned, fetched, fails to start.
  std::string config = ReadTextFile(device("agent.yaml"));
  absl::StrReplaceAll({{"priority: speed", "priority: fidelity"}}, &config);
  WriteTextFile(device("agent.yaml"), config);
  const auto run_once = [&] {
    return RunProcess({WEIGHTPATH_AGENT_BINARY, "run", "--once", "--config", device("agent.yaml")},
                      {{"WEIGHTPATH_HW_PROFILE", profile_path()}}, absl::Seconds(60));
  };
  const ProcessResult rolled_back = run_once();
  EXPECT_THAT(rolled_back.err, HasSubstr("new build failed, going back")) << rolled_back.err;
  EXPECT_THAT(ReadTextFile(device("run/engine.env")),
              HasSubstr(absl::StrCat("WEIGHTPATH_PATH=", expected_path_)));

  auto admin = v1::FleetAdmin::NewStub(server::testing::PlaintextChannel(address));
  v1::ListDevicesRequest drifted_only;
  drifted_only.set_drifted_only(true);
  v1::ListDevicesResponse listed;
  ASSERT_TRUE(server::testing::Eventually([&] {
    listed.Clear();
    return admin->ListDevices(server::testing::AdminContext().get(), drifted_only, &listed).ok() &&
           listed.devices_size() == 1 && listed.devices(0).path() != expected_path_;
  })) << listed.DebugString() << AllDevices(*admin) << server_->Log();
  const v1::Device& device_record = listed.devices(0);
  EXPECT_EQ(device_record.device_id(), "edge-test-0001");
  EXPECT_EQ(device_record.running().path(), expected_path_);
  EXPECT_EQ(device_record.running().source(), v1::BOOT_SOURCE_SERVER);
  EXPECT_EQ(device_record.running().artifact_sha256(), expected_artifact().sha256());
  EXPECT_EQ(device_record.drift().reason(), "rolled_back");
  const std::string assigned = device_record.path();

  v1::FleetSummaryResponse summary;
  ASSERT_TRUE(admin->FleetSummary(server::testing::AdminContext().get(), {}, &summary).ok());
  EXPECT_EQ(summary.drifted_devices(), 1u);
  ASSERT_EQ(summary.running_cells_size(), 1);
  EXPECT_EQ(summary.running_cells(0).path(), expected_path_);
  ASSERT_EQ(summary.cells_size(), 1);
  EXPECT_EQ(summary.cells(0).path(), assigned);

  const auto drifted_gauge = [&] {
    absl::StatusOr<std::string> metrics =
        server::testing::HttpGet(server_->metrics_address(), "/metrics");
    if (!metrics.ok()) return -1.0;
    return server::testing::SampleValue(
               *metrics,
               "weightpath_devices_drifted{hardware_class=\"x86_cpu\",reason=\"rolled_back\"}")
        .value_or(-1);
  };
  EXPECT_TRUE(server::testing::Eventually([&] { return drifted_gauge() == 1; }))
      << drifted_gauge();

  // The engine is mended; a pass that starts the build converges.
  WriteTextFile(work_.Sub("apply.sh"), "#!/bin/sh\nexit 0\n");
  const ProcessResult converged = run_once();
  ASSERT_EQ(converged.exit_code, 0) << converged.err;
  EXPECT_THAT(ReadTextFile(device("run/engine.env")),
              HasSubstr(absl::StrCat("WEIGHTPATH_PATH=", assigned)));
  EXPECT_TRUE(server::testing::Eventually([&] {
    listed.Clear();
    return admin->ListDevices(server::testing::AdminContext().get(), drifted_only, &listed).ok() &&
           listed.devices_size() == 0;
  })) << listed.DebugString();
  EXPECT_TRUE(server::testing::Eventually([&] { return drifted_gauge() == 0; }));
}

// A peer that completes the TCP handshake (the kernel does that for a
// listening socket) and then never says a word.
TEST_F(AgentBootEndToEnd, HangingServerHitsTheCallDeadlineAndFallsBackWithinBudget) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 64), 0);
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  WriteAgentConfig(absl::StrCat("127.0.0.1:", ntohs(address.sin_port)), "", kFallbackTiming);
  // Reports earlier boots left, more than are kept: none is sent to a
  // server that did not answer, and the newest wait for one that does.
  std::string pending;
  for (int i = 40; i > 0; --i) {
    std::string line;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(
                    BootReport("edge-test-0001", v1::OUTCOME_BOOT_OK, DecisionRecord{}, "",
                               absl::Now() - absl::Minutes(i)),
                    &line)
                    .ok());
    absl::StrAppend(&pending, line, "\n");
  }
  WriteTextFile(device("state/pending_reports.jsonl"), pending);

  const ProcessResult boot = Boot();
  ::close(listener);
  ASSERT_EQ(boot.exit_code, 4) << boot.err;
  EXPECT_GE(boot.wall_time, absl::Seconds(1)) << "at least one full call deadline";
  EXPECT_LT(boot.wall_time, absl::Seconds(4) + kProcessSlack);
  EXPECT_THAT(boot.err, HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_EQ(Decision().source, DecisionSource::kOffline);
  EXPECT_THAT(boot.err, AllOf(HasSubstr("8 older report(s) dropped, the newest 32 kept"),
                              HasSubstr("32 outcome report(s) kept in"),
                              Not(HasSubstr("not accepted"))));
  const std::vector<std::string> kept =
      absl::StrSplit(ReadTextFile(device("state/pending_reports.jsonl")), '\n', absl::SkipEmpty());
  ASSERT_THAT(kept, SizeIs(32));
  EXPECT_THAT(kept.back(), HasSubstr("BOOT_SOURCE_OFFLINE")) << "this boot's own, newest";
}

TEST_F(AgentBootEndToEnd, UnknownModelIsNotRetried) {
  WriteAgentConfig(StartServer(catalog_path()), "model: No-Such-Model\n");
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 4) << boot.err;
  EXPECT_EQ(ResolveAttempts(boot.err), 1) << boot.err;
  EXPECT_THAT(boot.err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(Decision().response.model(), "No-Such-Model");
}

TEST_F(AgentBootEndToEnd, CorruptArtifactIsRejectedAndThePreviousGoodDecisionKept) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  const std::string good_json = ReadTextFile(device("state/last_good_decision.json"));

  // A new build of the same path is published, but its bytes on the
  // artifact host do not match the catalog's digest.
  StopServer();
  v1::Artifact& artifact = artifacts_.at(expected_path_);
  const v1::Artifact previous = artifact;
  artifact = WriteArtifact(served() + "/" + expected_path_ + "-v2.bin",
                           ArtifactBytes(kArtifactBytes, 99), http_->Url(expected_path_ + "-v2.bin"));
  std::string corrupted = ArtifactBytes(kArtifactBytes, 99);
  corrupted[1234] ^= 0x10;
  WriteTextFile(served() + "/" + expected_path_ + "-v2.bin", corrupted);
  WriteCatalog(work_.Sub("catalog-v2.yaml"), {});
  WriteAgentConfig(StartServer(work_.Sub("catalog-v2.yaml")));

  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_THAT(boot.err, AllOf(HasSubstr("DATA_LOSS"), HasSubstr("corrupted")));
  EXPECT_FALSE(fs::exists(device("cache/" + artifact.sha256())));
  EXPECT_FALSE(fs::exists(device("cache/" + artifact.sha256() + ".partial")));
  const DecisionRecord decision = Decision();
  EXPECT_EQ(decision.source, DecisionSource::kLastGood);
  EXPECT_EQ(decision.response.artifact().sha256(), previous.sha256());
  EXPECT_EQ(decision.artifact_path, device("cache/" + previous.sha256()));
  EXPECT_EQ(ReadTextFile(device("state/last_good_decision.json")), good_json);
}

TEST_F(AgentBootEndToEnd, InterruptedDownloadResumesOnTheNextBoot) {
  const std::string cut_uri = expected_artifact().uri() + "?cut_after=100000";
  WriteCatalog(work_.Sub("catalog-cut.yaml"), {{expected_path_, cut_uri}});
  WriteAgentConfig(StartServer(work_.Sub("catalog-cut.yaml")));
  const ProcessResult interrupted = Boot();
  ASSERT_EQ(interrupted.exit_code, 4) << interrupted.err;
  EXPECT_THAT(interrupted.err, HasSubstr("kept for resume"));
  EXPECT_EQ(fs::file_size(cached_artifact() + ".partial"), 100000u);

  StopServer();
  WriteAgentConfig(StartServer(catalog_path()));
  const ProcessResult resumed = Boot();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, HasSubstr("resumed from 100000 bytes already held"));
  EXPECT_THAT(http_->RequestLog(), Contains(HasSubstr("range=bytes=100000- status=206")));
  EXPECT_EQ(ReadTextFile(cached_artifact()),
            ReadTextFile(served() + "/" + expected_path_ + ".bin"));
}

TEST_F(AgentBootEndToEnd, OfflineDecisionFetchesTheArtifactKnownFromTheLastGoodDecision) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  fs::remove(cached_artifact());  // e.g. the cache was wiped
  StopServer();
  WriteAgentConfig(absl::StrCat("127.0.0.1:", UnusedPort()), "", kFallbackTiming);

  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 4) << boot.err;
  const DecisionRecord decision = Decision();
  EXPECT_EQ(decision.source, DecisionSource::kOffline);
  EXPECT_EQ(decision.artifact_path, cached_artifact());
  EXPECT_EQ(decision.response.model(), kModel);
  EXPECT_EQ(ArtifactRequests(), 2);
}

TEST_F(AgentBootEndToEnd, MutualTlsResolvesWithTheDeviceCertificate) {
  auto ca = server::testing::TestCa::Create();
  ASSERT_TRUE(ca.ok()) << ca.status();
  ASSERT_TRUE((*ca)->IssueClient("device", "/CN=edge-test-0001").ok());
  const std::string tls = (*ca)->File("");
  const std::string address =
      StartServer(catalog_path(), {"--tls_cert=" + tls + "server.pem",
                                   "--tls_key=" + tls + "server.key",
                                   "--client_ca=" + tls + "ca.pem"});
  WriteAgentConfig(address, absl::StrCat("tls:\n  ca: ", tls, "ca.pem\n  cert: ", tls,
                                         "device.pem\n  key: ", tls, "device.key\n"));
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  EXPECT_EQ(Decision().source, DecisionSource::kServer);
  EXPECT_EQ(Decision().artifact_path, cached_artifact());
}

TEST_F(AgentBootEndToEnd, UnreadableTlsFileFallsBackNamingTheField) {
  WriteAgentConfig(StartServer(catalog_path()),
                   absl::StrCat("tls:\n  ca: ", work_.Sub("missing-ca.pem"), "\n"));
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 4) << boot.err;
  EXPECT_THAT(boot.err, AllOf(HasSubstr("FAILED_PRECONDITION"), HasSubstr("tls.ca")));
  EXPECT_EQ(ResolveAttempts(boot.err), 1);
  EXPECT_EQ(Decision().source, DecisionSource::kOffline);
}

TEST_F(AgentBootEndToEnd, InvalidConfigExitsOneNamingTheLine) {
  WriteAgentConfig("127.0.0.1:1", "bugdet: 10\n");
  const ProcessResult boot = Boot();
  EXPECT_EQ(boot.exit_code, 1);
  EXPECT_THAT(boot.err, AllOf(HasSubstr("agent.yaml:14"), HasSubstr("bugdet")));
  EXPECT_FALSE(fs::exists(device("run/decision.json")));
}

TEST_F(AgentBootEndToEnd, HelpListsTheExitCodes) {
  const ProcessResult help =
      RunProcess({WEIGHTPATH_AGENT_BINARY, "boot", "--help"}, {}, absl::Seconds(30));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, AllOf(HasSubstr("exit codes"), HasSubstr("3  the server"),
                                      HasSubstr("4  the server")));
  const ProcessResult usage =
      RunProcess({WEIGHTPATH_AGENT_BINARY, "boot"}, {}, absl::Seconds(30));
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("--config FILE is required"));
}

// The budget of the hostile-input boots below (the figure of the report:
// a FIFO kept a 6 s boot running past 60 s).
constexpr char kSixSecondBudget[] = "budget: 6\ncall_timeout: 2\n";

// A catalog whose entry for this device's path is a FIFO: libcurl used to
// block in its open() for as long as no writer came.
TEST_F(AgentBootEndToEnd, FifoAsTheArtifactFallsBackWithinTheBudget) {
  const std::string fifo = work_.Sub("artifact.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  WriteCatalog(work_.Sub("catalog-fifo.yaml"), {{expected_path_, "file://" + fifo}});
  WriteAgentConfig(StartServer(work_.Sub("catalog-fifo.yaml")), "", kSixSecondBudget);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 4) << boot.err;
  EXPECT_LT(boot.wall_time, absl::Seconds(6) + kProcessSlack);
  EXPECT_THAT(boot.err, AllOf(HasSubstr("artifact.uri"), HasSubstr("is a FIFO, not a regular file")));
  EXPECT_EQ(Decision().source, DecisionSource::kOffline);
  EXPECT_FALSE(fs::exists(device("state/last_good_decision.json")));
}

TEST_F(AgentBootEndToEnd, FifoAsANewArtifactKeepsTheLastGoodDecision) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  StopServer();
  // A new build of the same path whose catalog entry names a FIFO.
  const std::string fifo = work_.Sub("artifact.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const v1::Artifact previous = artifacts_.at(expected_path_);
  artifacts_[expected_path_].set_sha256(std::string(64, 'b'));
  WriteCatalog(work_.Sub("catalog-fifo.yaml"), {{expected_path_, "file://" + fifo}});
  WriteAgentConfig(StartServer(work_.Sub("catalog-fifo.yaml")), "", kSixSecondBudget);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_LT(boot.wall_time, absl::Seconds(6) + kProcessSlack);
  EXPECT_THAT(boot.err, HasSubstr("is a FIFO"));
  EXPECT_EQ(Decision().response.artifact().sha256(), previous.sha256());
}

// An artifact host that accepts the connection and never answers: the
// download ends with the budget, and the boot with it.
TEST_F(AgentBootEndToEnd, ArtifactHostThatNeverAnswersIsCutOffAtTheBudget) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 64), 0);
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string silent_uri = absl::StrCat("http://127.0.0.1:", ntohs(address.sin_port), "/a.bin");
  WriteCatalog(work_.Sub("catalog-hang.yaml"), {{expected_path_, silent_uri}});
  WriteAgentConfig(StartServer(work_.Sub("catalog-hang.yaml")), "", kSixSecondBudget);
  const ProcessResult boot = Boot();
  ::close(listener);
  ASSERT_EQ(boot.exit_code, 4) << boot.err;
  EXPECT_GE(boot.wall_time, absl::Seconds(4)) << "the download had the rest of the budget";
  EXPECT_LT(boot.wall_time, absl::Seconds(6) + kProcessSlack);
  EXPECT_THAT(boot.err, AllOf(HasSubstr("DEADLINE_EXCEEDED"), HasSubstr("ran out of time")));
}

// A server shedding load answers RESOURCE_EXHAUSTED with grpc-retry-pushback-ms:
// the agent reads the trailer and waits that long instead of its own backoff
// (100 ms doubling here, which would have spent five or six more calls
// against the limit before the next token).
TEST_F(AgentBootEndToEnd, RateLimitedResolveWaitsTheServersPushback) {
  // One call per device every 2 s.
  WriteAgentConfig(StartServer(catalog_path(), {"--device_rate_limit=0.5", "--device_rate_burst=1"}));
  const ProcessResult first = Boot();  // spends the device's token
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const ProcessResult second = Boot();
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.err, HasSubstr("decision from the server"));
  EXPECT_THAT(second.err, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_EQ(ResolveAttempts(second.err), 1) << second.err;
  EXPECT_THAT(second.err, HasSubstr("after 2 attempt(s)"));
}

// Local input files that are not small regular files: each is an error
// naming the file, at once, instead of a hang (FIFO) or an abort with
// bad_alloc (/dev/zero).
TEST_F(AgentBootEndToEnd, ReportRefusesInputFilesThatAreNotSmallRegularFiles) {
  WriteAgentConfig(absl::StrCat("127.0.0.1:", UnusedPort()));
  const std::string fifo = work_.Sub("measurement.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  WriteTextFile(work_.Sub("huge.json"), std::string((1 << 20) + 1, ' '));
  const std::pair<std::string, std::string> inputs[] = {
      {"/dev/zero", "a character device"},
      {fifo, "a FIFO"},
      {work_.Sub("huge.json"), "larger than the limit of 1048576 bytes"},
      {work_.path(), "a directory"}};
  for (const auto& [file, complaint] : inputs) {
    SCOPED_TRACE(file);
    const ProcessResult report =
        RunProcess({WEIGHTPATH_AGENT_BINARY, "report", "--file", file, "--config",
                    device("agent.yaml")},
                   {}, absl::Seconds(20));
    EXPECT_EQ(report.exit_code, 2) << report.err;
    EXPECT_THAT(report.err, AllOf(HasSubstr("--file"), HasSubstr(file), HasSubstr(complaint)));
    EXPECT_LT(report.wall_time, absl::Seconds(10));
  }
}

TEST_F(AgentBootEndToEnd, BootRefusesAConfigOrProfileThatIsNotASmallRegularFile) {
  const std::string fifo = work_.Sub("input.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& config : {fifo, std::string("/dev/zero")}) {
    const ProcessResult boot = RunProcess({WEIGHTPATH_AGENT_BINARY, "boot", "--config", config},
                                          {{"WEIGHTPATH_HW_PROFILE", profile_path()}},
                                          absl::Seconds(20));
    EXPECT_EQ(boot.exit_code, 1) << boot.err;
    EXPECT_THAT(boot.err, AllOf(HasSubstr("config"), HasSubstr(config)));
    EXPECT_LT(boot.wall_time, absl::Seconds(10));
  }
  WriteAgentConfig(absl::StrCat("127.0.0.1:", UnusedPort()), "", kFallbackTiming);
  for (const std::string& profile : {fifo, std::string("/dev/zero")}) {
    const ProcessResult boot =
        RunProcess({WEIGHTPATH_AGENT_BINARY, "boot", "--config", device("agent.yaml")},
                   {{"WEIGHTPATH_HW_PROFILE", profile}}, absl::Seconds(20));
    EXPECT_EQ(boot.exit_code, 1) << boot.err;
    EXPECT_THAT(boot.err, AllOf(HasSubstr("WEIGHTPATH_HW_PROFILE"), HasSubstr(profile),
                                HasSubstr("not a regular file")));
    EXPECT_LT(boot.wall_time, absl::Seconds(10));
  }
}

// What a crash between creating a temporary file and its rename leaves
// behind is removed by the next boot: only names of the agent's own
// pattern, never a symlink (nor what it points to).
TEST_F(AgentBootEndToEnd, BootRemovesStaleTemporaryFilesOfItsOwnNaming) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  const std::vector<std::string> stale = {device("run/.decision.json.tmp.Qw3rTy"),
                                          device("run/.engine.env.tmp.a1B2c3"),
                                          device("state/.last_good_decision.json.tmp.zZ9yY8")};
  const std::vector<std::string> kept = {device("run/.decision.json.tmp.short"),
                                         device("run/.unrelated.tmp.ABCDEF"),
                                         device("state/notes.txt")};
  const std::string outside = work_.Sub("operator-file.txt");
  const std::string link = device("run/.engine.env.tmp.LnK123");
  WriteTextFile(outside, "keep me");
  for (const std::string& path : stale) WriteTextFile(path, "half-written");
  for (const std::string& path : kept) WriteTextFile(path, "not the agent's");
  ASSERT_EQ(::symlink(outside.c_str(), link.c_str()), 0);
  const struct timespec an_hour_ago[2] = {absl::ToTimespec(absl::Now() - absl::Hours(1)),
                                          absl::ToTimespec(absl::Now() - absl::Hours(1))};
  for (const std::string& path : stale) {
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), an_hour_ago, 0), 0);
  }
  for (const std::string& path : kept) {
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), an_hour_ago, 0), 0);
  }
  ASSERT_EQ(::utimensat(AT_FDCWD, link.c_str(), an_hour_ago, AT_SYMLINK_NOFOLLOW), 0);

  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  for (const std::string& path : stale) {
    EXPECT_FALSE(fs::exists(path)) << path;
    EXPECT_THAT(boot.err, HasSubstr("removed " + path));
  }
  for (const std::string& path : kept) EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(ReadTextFile(outside), "keep me");
}

// A last good decision edited on the device to carry a key the engine
// unit's shell would run: the agent refuses to repeat it, hands over the
// offline decision, and the unit, run as shipped, runs nothing.
TEST_F(AgentBootEndToEnd, PoisonedLastGoodDecisionIsRefusedAndTheUnitRunsNothing) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  StopServer();
  const std::string marker = work_.Sub("pwned");
  const std::string key = absl::StrCat("max_model_len $(touch ", marker, ");x `touch ", marker, "`");
  std::string saved = ReadTextFile(device("state/last_good_decision.json"));
  const std::string kwargs_entry = "\"engine_kwargs\": {";
  ASSERT_NE(saved.find(kwargs_entry), std::string::npos) << saved;
  saved.insert(saved.find(kwargs_entry) + kwargs_entry.size(),
               absl::StrCat("\"", absl::StrReplaceAll(key, {{"\"", "\\\""}}), "\": 1, "));
  WriteTextFile(device("state/last_good_decision.json"), saved);
  WriteAgentConfig(absl::StrCat("127.0.0.1:", UnusedPort()), "", kFallbackTiming);

  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 4) << boot.err;
  EXPECT_THAT(boot.err, AllOf(HasSubstr("last good decision unreadable"),
                              HasSubstr("engine_kwargs: key"), HasSubstr("touch")));
  EXPECT_EQ(Decision().source, DecisionSource::kOffline);
  EXPECT_THAT(ReadTextFile(device("run/engine.env")), Not(HasSubstr("touch")));
  const std::string engine = testing::WriteFakeEngine(work_.path());
  const testing::EngineLaunch from_sh = testing::LaunchWithShell(device("run/engine.env"), engine);
  EXPECT_EQ(from_sh.exit_code, 0) << from_sh.err;
  EXPECT_FALSE(fs::exists(marker));
  absl::StatusOr<std::map<std::string, std::string>> systemd =
      testing::ReadLikeSystemd(device("run/engine.env"));
  if (absl::IsUnimplemented(systemd.status())) GTEST_SKIP() << systemd.status();
  ASSERT_THAT(systemd, IsOk());
  const testing::EngineLaunch from_systemd = testing::LaunchWithEnvironment(*systemd, engine);
  EXPECT_EQ(from_systemd.exit_code, 0) << from_systemd.err;
  EXPECT_EQ(from_systemd.argv, from_sh.argv);
  EXPECT_FALSE(fs::exists(marker));
}

// 40 reports earlier boots left (more than the 32 kept) and a server whose
// store is slow: each report waits out its call deadline while resolves are
// answered (a viewer's heavy reads did this in the field). The reports were
// sent one after another outside the budget, each with the full
// call_timeout: 33 x 10 s here, and the unit's TimeoutStartSec killed boot,
// and with it the engine that Requires= it, on every boot.
TEST_F(AgentBootEndToEnd, PendingReportsToASlowStoreEndWithTheBudgetAndWaitForLater) {
  const std::string store = work_.Sub("fleet.db");
  const std::string address = StartServer(catalog_path(), {"--store=sqlite:" + store});
  WriteAgentConfig(address);
  ASSERT_EQ(Boot().exit_code, 0);
  ASSERT_EQ(BootsCounted(*server_, "server"), 1);

  DecisionRecord earlier = Decision();
  earlier.source = DecisionSource::kLastGood;
  std::string pending;
  for (int i = 40; i > 0; --i) {
    std::string line;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(
                    BootReport("edge-test-0001", v1::OUTCOME_BOOT_OK, earlier, "",
                               absl::Now() - absl::Minutes(i)),
                    &line)
                    .ok());
    absl::StrAppend(&pending, line, "\n");
  }
  WriteTextFile(device("state/pending_reports.jsonl"), pending);
  WriteAgentConfig(address, "", "budget: 3\ncall_timeout: 10\n");

  store::testing::SqliteFileConnection lock(store);
  ASSERT_TRUE(lock.Exec("BEGIN IMMEDIATE"));
  const ProcessResult boot = Boot();
  ASSERT_TRUE(lock.Exec("COMMIT"));
  RecordProperty("boot_ms", static_cast<int>(absl::ToInt64Milliseconds(boot.wall_time)));
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  EXPECT_LT(boot.wall_time, absl::Seconds(3) + kProcessSlack) << boot.err;
  EXPECT_THAT(boot.err, AllOf(HasSubstr("8 older report(s) dropped, the newest 32 kept"),
                              HasSubstr("boot: report OUTCOME_BOOT_OK not accepted"),
                              HasSubstr("32 more report(s) not sent now"),
                              HasSubstr("report(s) kept in")));
  const std::vector<std::string> kept =
      absl::StrSplit(ReadTextFile(device("state/pending_reports.jsonl")), '\n', absl::SkipEmpty());
  ASSERT_THAT(kept, SizeIs(32));
  EXPECT_THAT(kept.back(), HasSubstr("BOOT_SOURCE_SERVER")) << "this boot's own, newest";

  // The store is quick again: the run loop's first pass sends them all.
  WriteAgentConfig(address);
  const ProcessResult run =
      RunProcess({WEIGHTPATH_AGENT_BINARY, "run", "--once", "--config", device("agent.yaml")},
                 {{"WEIGHTPATH_HW_PROFILE", profile_path()}}, absl::Seconds(60));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(fs::exists(device("state/pending_reports.jsonl")));
  EXPECT_EQ(BootsCounted(*server_, "last_good"), 31);
  EXPECT_EQ(BootsCounted(*server_, "server"), 2);
}

// A readiness endpoint answering a status line that is not UTF-8. Its bytes
// reached ENGINE_START_FAILED's detail raw, the server could not parse the
// request, and the report of the failed start was lost.
TEST_F(AgentBootEndToEnd, AReadinessAnswerThatIsNotUtf8IsReportedAsEngineStartFailed) {
  WriteAgentConfig(StartServer(catalog_path()));
  ASSERT_EQ(Boot().exit_code, 0);
  testing::CannedHttpServer engine("HTTP/1.1 2\xff\xfe OK\r\nContent-Length: 0\r\n\r\n");
  const ProcessResult reported = RunProcess(
      {WEIGHTPATH_AGENT_BINARY, "outcome", "--config", device("agent.yaml"), "--outcome",
       "engine_started", "--wait-ready", engine.Url("/health"), "--ready-timeout", "1s"},
      {}, absl::Seconds(60));
  EXPECT_EQ(reported.exit_code, 1) << "the engine never became ready: " << reported.err;
  EXPECT_THAT(reported.out, HasSubstr("reported OUTCOME_ENGINE_START_FAILED"));
  EXPECT_THAT(reported.err, AllOf(HasSubstr("engine not ready"), HasSubstr("2\\xff\\xfe OK")));
  absl::StatusOr<std::string> metrics =
      server::testing::HttpGet(server_->metrics_address(), "/metrics");
  ASSERT_THAT(metrics, IsOk());
  EXPECT_EQ(server::testing::SampleValue(
                *metrics,
                "weightpath_outcomes_outside_rollouts_total{outcome=\"engine_start_failed\"}")
                .value_or(-1),
            1);
}

// Hostile artifact mirrors (tests/README.md, "Faults with real processes"):
// 500s, bytes trickled slower than the budget allows, and a Content-Length
// that is not the artifact's, shorter and longer. None may install a wrong
// artifact, touch the last good one, or lose a partial download the design
// means to resume.
class AgentBootHostileMirror : public AgentBootEndToEnd {
 protected:
  // A first boot against the honest mirror: the device has a last good
  // decision and its artifact.
  void BootOnceHonestly() {
    WriteAgentConfig(StartServer(catalog_path()));
    const ProcessResult boot = Boot();
    ASSERT_EQ(boot.exit_code, 0) << boot.err;
    previous_ = expected_artifact();
    last_good_json_ = ReadTextFile(device("state/last_good_decision.json"));
  }

  // A new build of the device's path, published with `query` appended to
  // its URI (the mirror's fault), and a server that hands it out.
  v1::Artifact PublishNewBuild(const std::string& query,
                               const std::string& timing = kServerTiming) {
    StopServer();
    const std::string name = expected_path_ + "-v2.bin";
    v1::Artifact& artifact = artifacts_.at(expected_path_);
    artifact = WriteArtifact(served() + "/" + name, ArtifactBytes(kArtifactBytes, 77),
                             http_->Url(name));
    WriteCatalog(work_.Sub("catalog-v2.yaml"), {{expected_path_, artifact.uri() + query}});
    WriteAgentConfig(StartServer(work_.Sub("catalog-v2.yaml")), "", timing);
    return artifact;
  }

  // The boot fell back to the last good decision, byte for byte, and
  // nothing of `refused` is installed.
  void ExpectLastGoodKept(const v1::Artifact& refused) {
    EXPECT_FALSE(fs::exists(device("cache/" + refused.sha256())));
    const DecisionRecord decision = Decision();
    EXPECT_EQ(decision.source, DecisionSource::kLastGood);
    EXPECT_EQ(decision.response.artifact().sha256(), previous_.sha256());
    EXPECT_EQ(decision.artifact_path, device("cache/" + previous_.sha256()));
    EXPECT_EQ(EnvVariable("WEIGHTPATH_ARTIFACT"), device("cache/" + previous_.sha256()));
    EXPECT_EQ(ReadTextFile(device("cache/" + previous_.sha256())),
              ReadTextFile(served() + "/" + expected_path_ + ".bin"));
    EXPECT_EQ(ReadTextFile(device("state/last_good_decision.json")), last_good_json_);
  }

  std::string Partial(const v1::Artifact& artifact) const {
    return device("cache/" + artifact.sha256() + ".partial");
  }
  std::string ServedBytes(const v1::Artifact& artifact) const {
    return ReadTextFile(served() + "/" + fs::path(artifact.uri()).filename().string());
  }

  v1::Artifact previous_;
  std::string last_good_json_;
};

TEST_F(AgentBootHostileMirror, FiveHundredsAreRefusedAndTheLastGoodDecisionKept) {
  BootOnceHonestly();
  const v1::Artifact refused = PublishNewBuild("?status=500");
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_THAT(boot.err, AllOf(HasSubstr("UNAVAILABLE"), HasSubstr("answered HTTP 500"),
                              HasSubstr("using the last good decision")));
  EXPECT_THAT(http_->RequestLog(), Contains(HasSubstr("-v2.bin?status=500 range=- status=500")));
  EXPECT_FALSE(fs::exists(Partial(refused))) << "the error page is not artifact bytes";
  ExpectLastGoodKept(refused);
}

TEST_F(AgentBootHostileMirror, APartialDownloadOutlivesFiveHundredsAndResumes) {
  const std::string uri = expected_artifact().uri();
  WriteCatalog(work_.Sub("catalog-cut.yaml"), {{expected_path_, uri + "?cut_after=100000"}});
  WriteAgentConfig(StartServer(work_.Sub("catalog-cut.yaml")));
  ASSERT_EQ(Boot().exit_code, 4);
  ASSERT_EQ(fs::file_size(cached_artifact() + ".partial"), 100000u);

  StopServer();
  WriteCatalog(work_.Sub("catalog-500.yaml"), {{expected_path_, uri + "?status=500"}});
  WriteAgentConfig(StartServer(work_.Sub("catalog-500.yaml")));
  const ProcessResult refused = Boot();
  ASSERT_EQ(refused.exit_code, 4) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("answered HTTP 500"));
  EXPECT_THAT(http_->RequestLog(), Contains(HasSubstr("range=bytes=100000- status=500")));
  EXPECT_EQ(ReadTextFile(cached_artifact() + ".partial"),
            ReadTextFile(served() + "/" + expected_path_ + ".bin").substr(0, 100000))
      << "the 500 left the kept bytes as they were";
  EXPECT_FALSE(fs::exists(cached_artifact()));

  StopServer();
  WriteAgentConfig(StartServer(catalog_path()));
  const ProcessResult resumed = Boot();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, HasSubstr("resumed from 100000 bytes already held"));
  EXPECT_EQ(ReadTextFile(cached_artifact()),
            ReadTextFile(served() + "/" + expected_path_ + ".bin"));
}

// 4 KiB every 100 ms: 256 KiB would take 6.4 s, the budget is 4 s.
TEST_F(AgentBootHostileMirror, TricklingBytesAreCutOffAtTheBudgetAndResumedByTheNextBoot) {
  BootOnceHonestly();
  const v1::Artifact slow = PublishNewBuild("?trickle=4096", kFallbackTiming);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_GE(boot.wall_time, absl::Seconds(2)) << "the download had the rest of the budget";
  EXPECT_LT(boot.wall_time, absl::Seconds(4) + kProcessSlack);
  EXPECT_THAT(boot.err, AllOf(HasSubstr("DEADLINE_EXCEEDED"), HasSubstr("ran out of time"),
                              HasSubstr("(kept for resume)")));
  ExpectLastGoodKept(slow);
  ASSERT_TRUE(fs::exists(Partial(slow)));
  const std::string kept = ReadTextFile(Partial(slow));
  EXPECT_GT(kept.size(), 0u);
  EXPECT_LT(kept.size(), kArtifactBytes);
  EXPECT_EQ(kept, ServedBytes(slow).substr(0, kept.size())) << "kept bytes are the artifact's";
  RecordProperty("kept_bytes", static_cast<int>(kept.size()));
  RecordProperty("boot_ms", static_cast<int>(absl::ToInt64Milliseconds(boot.wall_time)));

  // The mirror mends: the next boot asks only for the rest.
  StopServer();
  WriteCatalog(work_.Sub("catalog-v2-mended.yaml"), {});
  WriteAgentConfig(StartServer(work_.Sub("catalog-v2-mended.yaml")));
  const ProcessResult resumed = Boot();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, HasSubstr(absl::StrCat("resumed from ", kept.size(), " bytes already held")));
  EXPECT_THAT(http_->RequestLog(),
              Contains(HasSubstr(absl::StrCat("range=bytes=", kept.size(), "- status=206"))));
  EXPECT_EQ(ReadTextFile(device("cache/" + slow.sha256())), ServedBytes(slow));
  EXPECT_EQ(Decision().response.artifact().sha256(), slow.sha256());
}

TEST_F(AgentBootHostileMirror, AShorterContentLengthIsRefusedAsTruncated) {
  BootOnceHonestly();
  const v1::Artifact shorter =
      PublishNewBuild(absl::StrCat("?claim_length=", kArtifactBytes - 1000));
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_THAT(boot.err, AllOf(HasSubstr("DATA_LOSS"),
                              HasSubstr(absl::StrCat("is truncated: got ", kArtifactBytes - 1000,
                                                     " bytes, artifact.size_bytes is ",
                                                     kArtifactBytes))));
  EXPECT_FALSE(fs::exists(Partial(shorter)));
  ExpectLastGoodKept(shorter);
}

TEST_F(AgentBootHostileMirror, ALongerBodyIsRefusedBeforeItFillsTheDisk) {
  BootOnceHonestly();
  const v1::Artifact longer =
      PublishNewBuild(absl::StrCat("?claim_length=", kArtifactBytes + 1000, "&pad=1"));
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_THAT(boot.err,
              AllOf(HasSubstr("DATA_LOSS"), HasSubstr("is larger than artifact.size_bytes")));
  EXPECT_FALSE(fs::exists(Partial(longer)));
  ExpectLastGoodKept(longer);
}

// A longer Content-Length whose body ends with the artifact's last byte (the
// connection closes there): every byte is in, and they verify.
TEST_F(AgentBootHostileMirror, ALongerContentLengthOverTheWholeArtifactInstallsItVerified) {
  BootOnceHonestly();
  const v1::Artifact whole = PublishNewBuild(absl::StrCat("?claim_length=", kArtifactBytes + 1000));
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  EXPECT_THAT(boot.err, HasSubstr("decision from the server"));
  EXPECT_EQ(Decision().artifact_path, device("cache/" + whole.sha256()));
  EXPECT_EQ(ReadTextFile(device("cache/" + whole.sha256())), ServedBytes(whole));
  EXPECT_FALSE(fs::exists(Partial(whole)));
}

// The device's directories (cache_dir and state_dir among them) on a small
// tmpfs, filled by a ballast file: the volume full while a new build
// downloads. Skipped, saying why, where the test may not mount (not root);
// AgentBootFileSizeLimit covers a refused write everywhere.
class AgentBootFullVolume : public AgentBootHostileMirror {
 protected:
  void SetUp() override {
    fs::create_directories(device(""));
    if (::mount("tmpfs", device("").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=4m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs on " << device("") << " (" << std::strerror(errno)
                   << "); AgentBootFileSizeLimit.* covers a refused write without mounting";
    }
    mounted_ = true;
    // The default reserve (32 MiB) is larger than the whole volume.
    fixture_config_ = "cache_reserve_bytes: 0\n";
    AgentBootHostileMirror::SetUp();
  }
  void TearDown() override {
    server_.reset();
    if (mounted_) ::umount2(device("").c_str(), MNT_DETACH);
  }

  uint64_t FreeBytes() const {
    struct statvfs volume;
    EXPECT_EQ(::statvfs(device("").c_str(), &volume), 0);
    return static_cast<uint64_t>(volume.f_bavail) * volume.f_frsize;
  }

  // Fills the volume with a ballast file until `leave` bytes are free (0:
  // to the last byte, as writes end with ENOSPC).
  void FillVolume(uint64_t leave) {
    const int fd = ::open(device("ballast").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const std::string chunk(4096, 'x');
    while (FreeBytes() > leave) {
      if (::write(fd, chunk.data(), chunk.size()) < 0) break;  // ENOSPC: full
    }
    ::close(fd);
  }

  // The config with `reserve` as cache_reserve_bytes.
  void Reconfigure(uint64_t reserve) {
    fixture_config_ = absl::StrCat("cache_reserve_bytes: ", reserve, "\n");
    WriteAgentConfig(server_->grpc_address());
  }

  bool mounted_ = false;
};

// The volume fills while a new build downloads (1.6 s at 16 KiB every
// 100 ms). Was: "UNAVAILABLE ... Failure writing output to destination", the
// partial file kept at 100% of the volume on every boot, and "pending
// outcome reports not saved: ... No space left on device".
TEST_F(AgentBootFullVolume, ANewBuildThatFillsTheVolumeIsRemovedAndTheBootReportsWhy) {
  BootOnceHonestly();
  const v1::Artifact next = PublishNewBuild("?trickle=16384");
  ::weightpath::testing::SpawnOptions options;
  options.stderr_path = work_.Sub("boot.log");
  options.extra_environment = {{"WEIGHTPATH_HW_PROFILE", profile_path()}};
  absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> boot =
      ::weightpath::testing::Subprocess::Start(
          {WEIGHTPATH_AGENT_BINARY, "boot", "--config", device("agent.yaml")}, options);
  ASSERT_THAT(boot, IsOk());
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up &&
         (!fs::exists(Partial(next)) || fs::file_size(Partial(next)) < 64 * 1024)) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(Partial(next))) << ReadTextFile(work_.Sub("boot.log"));
  FillVolume(0);
  const ::weightpath::testing::ExitStatus ended = (*boot)->Wait(absl::Seconds(60));
  const std::string log = ReadTextFile(work_.Sub("boot.log"));
  ASSERT_EQ(ended.exit_code, 3) << log;
  EXPECT_THAT(log, AllOf(HasSubstr("RESOURCE_EXHAUSTED: artifact: cannot write " + Partial(next)),
                         HasSubstr("No space left on device (ENOSPC)"),
                         HasSubstr("bytes free in cache_dir " + device("cache")),
                         HasSubstr("was removed so the volume is not left full"),
                         Not(HasSubstr("Failure writing output to destination")),
                         Not(HasSubstr("not saved"))));
  EXPECT_FALSE(fs::exists(Partial(next)));
  ExpectLastGoodKept(next);
  // The fleet hears why: the fallback boot's report, kept for later, says.
  EXPECT_THAT(ReadTextFile(device("state/pending_reports.jsonl")),
              AllOf(HasSubstr("BOOT_SOURCE_LAST_GOOD"), HasSubstr("ENOSPC")));

  // Space again: the next boot downloads the build whole and installs it.
  ASSERT_EQ(::unlink(device("ballast").c_str()), 0);
  const ProcessResult again = Boot();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(ReadTextFile(device("cache/" + next.sha256())), ServedBytes(next));
  EXPECT_FALSE(fs::exists(device("state/pending_reports.jsonl"))) << "sent with this boot";
}

// Too little room for the rest of the artifact and the reserve: refused
// before a byte is fetched, so the state files keep their room.
TEST_F(AgentBootFullVolume, ADownloadThatWouldEatTheReserveIsNotStarted) {
  BootOnceHonestly();
  const v1::Artifact next = PublishNewBuild("");
  Reconfigure(1048576);
  FillVolume(1048576 + 128 * 1024);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_THAT(boot.err,
              AllOf(HasSubstr("RESOURCE_EXHAUSTED: artifact: build " + next.sha256() +
                              " (1 file) does not fit the cache"),
                    HasSubstr(absl::StrCat("it needs ", kArtifactBytes, " more bytes")),
                    HasSubstr("keeps cache_min_free_bytes 1048576 free"),
                    HasSubstr("nothing was downloaded"), HasSubstr("reported OUTCOME_CACHE_FULL")));
  EXPECT_THAT(http_->RequestLog(), Not(Contains(HasSubstr("-v2.bin"))));
  EXPECT_FALSE(fs::exists(Partial(next)));
  ExpectLastGoodKept(next);
  EXPECT_TRUE(fs::exists(device("state/pending_reports.jsonl")));
}

// The same refused write without a mount: the agent's file size limit
// (`prlimit --fsize`, a container's `ulimit -f`, systemd's LimitFSIZE=)
// below the artifact. SIGXFSZ would have killed the agent mid-download; it
// is ignored, and the write fails EFBIG.
using AgentBootFileSizeLimit = AgentBootHostileMirror;

TEST_F(AgentBootFileSizeLimit, AWriteRefusedAtTheLimitRemovesThePartialAndNamesIt) {
  if (!fs::exists("/usr/bin/prlimit")) GTEST_SKIP() << "/usr/bin/prlimit (util-linux) is missing";
  BootOnceHonestly();
  const v1::Artifact next = PublishNewBuild("");
  const ProcessResult boot =
      RunProcess({"/usr/bin/prlimit", "--fsize=100000", "--", WEIGHTPATH_AGENT_BINARY, "boot",
                  "--config", device("agent.yaml")},
                 {{"WEIGHTPATH_HW_PROFILE", profile_path()}}, absl::Seconds(60));
  ASSERT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_THAT(boot.err, AllOf(HasSubstr("RESOURCE_EXHAUSTED: artifact: cannot write " + Partial(next)),
                              HasSubstr("File too large (EFBIG)"),
                              HasSubstr("the partial download (100000 bytes) was removed")));
  EXPECT_FALSE(fs::exists(Partial(next)));
  ExpectLastGoodKept(next);
}

}  // namespace
}  // namespace weightpath::agent
