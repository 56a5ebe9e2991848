// A fidelity rollout end to end with the real binaries on loopback:
// weightpath-server (SQLite fleet store, operator bearer token),
// `weightpathctl rollout`, and `weightpath-agent boot` / `outcome` with an
// AMX x86 profile. Agentic devices switch from w4a8-amx to w4a16-tinygemm
// as their bucket is reached; other devices never change.
//
// Buckets (deploy/README.md): device-0002 is 34 in "fidelity-agentic" (in
// from the 1% stage), device-0001 is 8492 (in only at 100%).
#include <stdlib.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/decision/decision_record.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/temp_dir.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"
#include "tests/testing/status_matchers.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;

constexpr char kModel[] = "Spark-X2.5-1.7B";
constexpr char kRolloutId[] = "fidelity-agentic";

constexpr char kAmxProfile[] = R"({
  "arch": "x86_64",
  "cpu_model": "Intel(R) Xeon(R) Platinum 8480C",
  "cpu_flags": ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "amx_int8", "fma", "f16c"],
  "n_logical": 8, "n_physical": 4, "numa_nodes": 1,
  "ram_total_bytes": 34359738368, "ram_available_bytes": 30000000000,
  "accelerator": "none", "supports_bf16": true, "host_os": "linux"
})";

// Two stages with a bake no test waits out: only the operator moves it.
constexpr char kRolloutYaml[] = R"(id: fidelity-agentic
description: agentic devices onto fidelity
selector:
  match_labels:
    workload: agentic
action:
  set_priority: PRIORITY_FIDELITY
stages:
  - percent: 1
    min_bake_seconds: 86400
    min_reporting_devices: 1
    report_timeout_seconds: 3600
  - percent: 100
    min_bake_seconds: 86400
    min_reporting_devices: 1
    report_timeout_seconds: 3600
gates:
  max_engine_failure_delta: 0.5
)";

class RolloutEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::shared_ptr<const policy::Policy> default_policy = policy::DefaultPolicy();
    std::string catalog = absl::StrCat("default_model: ", kModel, "\nmodels:\n  ", kModel, ":\n");
    uint32_t seed = 1;
    for (const std::string& name : default_policy->ReachablePathNames()) {
      const std::string file = dir_.Sub("served/" + name + ".bin");
      const v1::Artifact artifact = agent::testing::WriteArtifact(
          file, agent::testing::ArtifactBytes(4096, seed++), "file://" + file);
      absl::StrAppend(&catalog, "    ", name, ":\n      uri: \"", artifact.uri(), "\"\n      sha256: ",
                      artifact.sha256(), "\n      size_bytes: ", artifact.size_bytes(),
                      "\n      version: \"", artifact.version(), "\"\n");
    }
    agent::testing::WriteTextFile(dir_.Sub("catalog.yaml"), catalog);
    server::testing::WriteSecretFileOrDie(dir_.Sub("admin.token"), "e2e-operator-token\n");
    agent::testing::WriteTextFile(dir_.Sub("profile.json"), kAmxProfile);
    agent::testing::WriteTextFile(dir_.Sub("rollout.yaml"), kRolloutYaml);
    ::setenv("WEIGHTPATH_HW_PROFILE", dir_.Sub("profile.json").c_str(), 1);

    absl::StatusOr<std::unique_ptr<server::testing::ServerProcess>> server =
        server::testing::ServerProcess::Start(
            {"--catalog=" + dir_.Sub("catalog.yaml"), "--reload_interval=0s",
             "--store=sqlite:" + dir_.Sub("fleet.db"),
             "--admin_token_file=" + dir_.Sub("admin.token"), "--fleet_refresh_interval=200ms"});
    ASSERT_THAT(server.status(), IsOk());
    server_ = *std::move(server);
  }

  ProcessResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), WEIGHTPATHCTL_PATH);
    for (const std::string& extra :
         {std::string("--server"), server_->grpc_address(), std::string("--token-file"),
          dir_.Sub("admin.token")}) {
      args.push_back(extra);
    }
    return RunProcess(args);
  }

  std::string AgentConfig(const std::string& device_id, const std::string& workload) {
    const std::string root = dir_.Sub(device_id);
    const std::string path = root + "/agent.yaml";
    agent::testing::WriteTextFile(
        path, absl::StrCat("server: ", server_->grpc_address(), "\n", "device_id: ", device_id, "\n",
                           "labels:\n  workload: ", workload, "\n", "state_dir: ", root, "/state\n",
                           "cache_dir: ", root, "/cache\n", "decision_file: ", root,
                           "/run/decision.json\n", "env_file: ", root, "/run/engine.env\n",
                           "budget: 20\ncall_timeout: 10\n"));
    return path;
  }

  // Boots the device and returns the path in its hand-over file.
  std::string Boot(const std::string& device_id, const std::string& workload) {
    const ProcessResult boot =
        RunProcess({WEIGHTPATH_AGENT_PATH, "boot", "--config", AgentConfig(device_id, workload)});
    EXPECT_EQ(boot.exit_code, 0) << boot.err;
    absl::StatusOr<agent::DecisionRecord> decision = agent::DecisionFromJson(
        agent::testing::ReadTextFile(dir_.Sub(device_id + "/run/decision.json")), device_id);
    EXPECT_THAT(decision.status(), IsOk());
    return decision.ok() ? decision->response.weight_path().name() : "";
  }

  // Waits until the registry has the device (its records are written
  // behind the resolve).
  void WaitForRegistered(const std::string& device_id) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (Ctl({"device", "show", device_id}).exit_code == 0) return;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << device_id << " never registered";
  }

  // The rollout as `status -o json` prints it, polled until `ready` holds.
  v1::Rollout WaitForStatus(const std::function<bool(const v1::Rollout&)>& ready) {
    v1::Rollout rollout;
    for (int attempt = 0; attempt < 150; ++attempt) {
      const ProcessResult status = Ctl({"rollout", "status", kRolloutId, "-o", "json"});
      EXPECT_EQ(status.exit_code, 0) << status.err;
      rollout.Clear();
      EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(status.out, &rollout).ok()) << status.out;
      if (ready(rollout)) return rollout;
      absl::SleepFor(absl::Milliseconds(200));
    }
    ADD_FAILURE() << "rollout never reached the expected state: " << rollout.ShortDebugString();
    return rollout;
  }

  agent::testing::TempDir dir_;
  std::unique_ptr<server::testing::ServerProcess> server_;
};

TEST_F(RolloutEndToEnd, AgenticDevicesSwitchToFidelityAsStagesAdvance) {
  EXPECT_EQ(Boot("device-0002", "agentic"), "w4a8-amx") << "no rollout yet";

  const ProcessResult created = Ctl({"rollout", "create", "-f", dir_.Sub("rollout.yaml")});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_THAT(created.out, HasSubstr("rollout fidelity-agentic: PROGRESSING"));
  EXPECT_THAT(created.out, HasSubstr("stage:     1 of 2 at 1%"));

  EXPECT_EQ(Boot("device-0002", "agentic"), "w4a16-tinygemm") << "bucket 34 is inside 1%";
  EXPECT_EQ(Boot("device-0001", "agentic"), "w4a8-amx") << "bucket 8492 is not";
  EXPECT_EQ(Boot("device-0003", "chat"), "w4a8-amx") << "outside the selector";

  // The engine's unit reports that it serves the new build.
  const ProcessResult reported =
      RunProcess({WEIGHTPATH_AGENT_PATH, "outcome", "--config", AgentConfig("device-0002", "agentic"),
                  "--outcome", "engine_started"});
  ASSERT_EQ(reported.exit_code, 0) << reported.err;
  EXPECT_THAT(reported.out, HasSubstr("rollout=fidelity-agentic"));
  const v1::Rollout counted = WaitForStatus(
      [](const v1::Rollout& r) { return r.members().engine_started() == 1 && r.control().devices() == 1; });
  EXPECT_EQ(counted.members().devices(), 1u);
  const ProcessResult view = Ctl({"rollout", "status", kRolloutId});
  EXPECT_THAT(view.out, HasSubstr("members:   1 device, 1 reporting"));

  const ProcessResult advanced = Ctl({"rollout", "advance", kRolloutId, "--reason", "looks good"});
  ASSERT_EQ(advanced.exit_code, 0) << advanced.err;
  EXPECT_THAT(advanced.out, HasSubstr("stage:     2 of 2 at 100%"));
  EXPECT_EQ(Boot("device-0001", "agentic"), "w4a16-tinygemm") << "100% takes every agentic device";
  EXPECT_EQ(Boot("device-0003", "chat"), "w4a8-amx");

  const ProcessResult listed = Ctl({"rollout", "list"});
  EXPECT_THAT(listed.out, HasSubstr("fidelity-agentic"));

  const ProcessResult aborted = Ctl({"rollout", "abort", kRolloutId});
  ASSERT_EQ(aborted.exit_code, 0) << aborted.err;
  EXPECT_THAT(aborted.out, HasSubstr("ABORTED"));
  EXPECT_EQ(Boot("device-0002", "agentic"), "w4a8-amx") << "abort returns members";
}

// The engine's unit reports its start only once the engine serves: the
// agent polls the readiness endpoint, and an engine that never comes up is
// reported as a failed start, which the rollout's engine gate counts.
TEST_F(RolloutEndToEnd, EngineStartIsReportedOnlyOnceTheEngineAnswersHealth) {
  const ProcessResult created = Ctl({"rollout", "create", "-f", dir_.Sub("rollout.yaml")});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  ASSERT_EQ(Boot("device-0002", "agentic"), "w4a16-tinygemm");

  const auto start_engine = [](const std::string& ready_after) {
    testing::SpawnOptions options;
    options.pipe_stdout = true;
    absl::StatusOr<std::unique_ptr<testing::Subprocess>> engine =
        testing::Subprocess::Start({"python3", WEIGHTPATH_FAKE_ENGINE, ready_after}, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  };
  const auto health_url = [](testing::Subprocess& engine) {
    absl::StatusOr<std::string> line = engine.WaitForLine("port ", absl::Seconds(10));
    EXPECT_TRUE(line.ok()) << line.status();
    return absl::StrCat("http://127.0.0.1:", line.ok() ? line->substr(5) : "1", "/health");
  };

  // Loading for a second and a half, then serving.
  std::unique_ptr<testing::Subprocess> slow = start_engine("1.5");
  ASSERT_NE(slow, nullptr);
  const absl::Time asked = absl::Now();
  const ProcessResult started =
      RunProcess({WEIGHTPATH_AGENT_PATH, "outcome", "--config", AgentConfig("device-0002", "agentic"),
                  "--outcome", "engine_started", "--wait-ready", health_url(*slow),
                  "--ready-timeout", "30s"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  EXPECT_THAT(started.out, HasSubstr("reported OUTCOME_ENGINE_STARTED"));
  EXPECT_GE(absl::Now() - asked, absl::Seconds(1)) << "reported before the engine served";
  const v1::Rollout counted =
      WaitForStatus([](const v1::Rollout& r) { return r.members().engine_started() == 1; });
  EXPECT_EQ(counted.members().engine_failed(), 0u);

  // Never serving: the start is reported as failed, with the reason.
  ASSERT_EQ(Boot("device-0001", "agentic"), "w4a8-amx");
  std::unique_ptr<testing::Subprocess> stuck = start_engine("-1");
  ASSERT_NE(stuck, nullptr);
  const std::string stuck_url = health_url(*stuck);
  const ProcessResult failed =
      RunProcess({WEIGHTPATH_AGENT_PATH, "outcome", "--config", AgentConfig("device-0001", "agentic"),
                  "--outcome", "engine_started", "--wait-ready", stuck_url, "--ready-timeout", "2s"});
  EXPECT_EQ(failed.exit_code, 1) << failed.out;
  EXPECT_THAT(failed.err, HasSubstr("engine not ready at " + stuck_url));
  EXPECT_THAT(failed.err, HasSubstr("last answer HTTP 503"));
  EXPECT_THAT(failed.out, HasSubstr("reported OUTCOME_ENGINE_START_FAILED"));

  const ProcessResult bad = RunProcess(
      {WEIGHTPATH_AGENT_PATH, "outcome", "--config", AgentConfig("device-0002", "agentic"),
       "--outcome", "tasks", "--tasks-completed", "1", "--wait-ready", stuck_url});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--wait-ready goes with --outcome engine_started"));
}

// Three stages, no bake, one report each: only the members each stage
// admitted can pass it. Buckets in "fidelity-agentic": device-0002 34
// (stage 1), device-0028 70 (stage 2, 10%), device-0001 8492 (stage 3).
constexpr char kStagedYaml[] = R"(id: fidelity-agentic
selector:
  match_labels:
    workload: agentic
action:
  set_priority: PRIORITY_FIDELITY
stages:
  - {percent: 1, min_bake_seconds: 0, min_reporting_devices: 1, report_timeout_seconds: 3600}
  - {percent: 10, min_bake_seconds: 0, min_reporting_devices: 1, report_timeout_seconds: 3600}
  - {percent: 100, min_bake_seconds: 0, min_reporting_devices: 1, report_timeout_seconds: 3600}
gates:
  max_engine_failure_delta: 0.5
)";

TEST_F(RolloutEndToEnd, ALateMembersRollbackKeepsTheLastStageFromCompletingAndIsCounted) {
  // Every device last checked in before the rollout existed.
  for (const char* device : {"device-0002", "device-0028", "device-0001"}) {
    ASSERT_EQ(Boot(device, "agentic"), "w4a8-amx");
    WaitForRegistered(device);
  }
  agent::testing::WriteTextFile(dir_.Sub("staged.yaml"), kStagedYaml);
  const ProcessResult created = Ctl({"rollout", "create", "-f", dir_.Sub("staged.yaml")});
  ASSERT_EQ(created.exit_code, 0) << created.err;

  const auto start = [&](const std::string& device, const std::string& outcome) {
    ASSERT_EQ(Boot(device, "agentic"), "w4a16-tinygemm") << device;
    const ProcessResult reported = RunProcess({WEIGHTPATH_AGENT_PATH, "outcome", "--config",
                                               AgentConfig(device, "agentic"), "--outcome", outcome});
    ASSERT_EQ(reported.exit_code, 0) << reported.err;
  };
  start("device-0002", "engine_started");
  WaitForStatus([](const v1::Rollout& r) { return r.current_stage() == 1; });
  start("device-0028", "engine_started");
  const v1::Rollout last = WaitForStatus([](const v1::Rollout& r) {
    return r.current_stage() == 2 && r.members().devices() == 1;
  });
  // Stage 3's one member has not resolved since the rollout began: the
  // earlier stages' two successes do not carry it.
  absl::SleepFor(absl::Seconds(1));
  const v1::Rollout waiting =
      WaitForStatus([](const v1::Rollout& r) { return r.all_members().devices() == 3; });
  EXPECT_EQ(waiting.state(), v1::ROLLOUT_STATE_PROGRESSING) << waiting.state_reason();
  EXPECT_THAT(waiting.state_reason(), HasSubstr("stage 3 of 3: 0 of 1 required member has concluded"));
  EXPECT_EQ(waiting.members().silent(), 0u);
  EXPECT_EQ(waiting.all_members().engine_started(), 2u);

  const ProcessResult devices = Ctl({"rollout", "status", kRolloutId, "--devices"});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("device-0001"));
  EXPECT_THAT(devices.out, ::testing::ContainsRegex("device-0002 +1 +x86_cpu +engine_started"));
  EXPECT_THAT(devices.out, ::testing::ContainsRegex("device-0028 +2 +x86_cpu +engine_started"));
  EXPECT_THAT(devices.out, ::testing::ContainsRegex("device-0001 +3 +x86_cpu +pending"));
  EXPECT_THAT(devices.out, HasSubstr("3 of 3 members shown"));

  // It fails late; the rollout pauses instead of completing, and counts it.
  start("device-0001", "engine_start_failed");
  const v1::Rollout paused =
      WaitForStatus([](const v1::Rollout& r) { return r.state() != v1::ROLLOUT_STATE_PROGRESSING; });
  EXPECT_EQ(paused.state(), v1::ROLLOUT_STATE_PAUSED) << paused.state_reason();
  EXPECT_THAT(paused.state_reason(), HasSubstr("stage 3 of 3: engine gate: members 1.000"));
  EXPECT_EQ(paused.members().engine_failed(), 1u);

  // Each step the driver took is in the audit trail once, as its own.
  const ProcessResult audit = Ctl({"audit"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  const auto rows = [&](const std::string& action) {
    int count = 0;
    for (absl::string_view line : absl::StrSplit(audit.out, '\n')) {
      if (absl::StrContains(line, action)) {
        ++count;
        EXPECT_THAT(std::string(line), ::testing::AllOf(HasSubstr("server:rollout-driver"),
                                                        HasSubstr("system"),
                                                        HasSubstr(kRolloutId)));
      }
    }
    return count;
  };
  EXPECT_EQ(rows("RolloutAdvanced"), 2) << audit.out;
  EXPECT_EQ(rows("RolloutPaused"), 1) << audit.out;
  EXPECT_THAT(audit.out, HasSubstr("paused by gate: stage 3 of 3: engine gate"));
  const ProcessResult audit_json = Ctl({"audit", "-o", "json"});
  EXPECT_THAT(audit_json.out, HasSubstr(R"(from_stage: 3 to_stage: 3 stages: 3 state: \"ROLLOUT_STATE_PAUSED\" gates: \"engine\")"));

  // The device's record (with its first shaped resolve) is written behind
  // its resolve, so it may reach the store after its report.
  v1::ListRolloutDevicesResponse listed;
  for (int attempt = 0; attempt < 50; ++attempt) {
    const ProcessResult failed =
        Ctl({"rollout", "status", kRolloutId, "--devices", "--failed", "-o", "json"});
    ASSERT_EQ(failed.exit_code, 0) << failed.err;
    listed.Clear();
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(failed.out, &listed).ok()) << failed.out;
    if (listed.devices_size() == 1 && listed.devices(0).has_first_shaped_resolve()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(listed.devices_size(), 1);
  EXPECT_EQ(listed.devices(0).device_id(), "device-0001");
  EXPECT_EQ(listed.devices(0).stage(), 2u);
  EXPECT_EQ(listed.devices(0).standing(), "failed");
  EXPECT_EQ(listed.devices(0).outcome(), v1::OUTCOME_ENGINE_START_FAILED);
  EXPECT_TRUE(listed.devices(0).has_first_shaped_resolve());
  EXPECT_TRUE(listed.devices(0).has_last_report());

  const ProcessResult bad_page = Ctl({"rollout", "status", kRolloutId, "--devices", "--page-size", "5000"});
  EXPECT_EQ(bad_page.exit_code, 2);
  EXPECT_THAT(bad_page.err, HasSubstr("--page-size: '5000'"));
  const ProcessResult stray = Ctl({"rollout", "status", kRolloutId, "--failed"});
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_THAT(stray.err, HasSubstr("--failed applies to --devices only"));
  (void)last;
}

// Members that last checked in before the rollout cannot know of it: their
// report timeout (2 s here) starts at their first shaped resolve.
TEST_F(RolloutEndToEnd, MembersThatHaveNotResolvedSinceTheRolloutBeganAreNotSilent) {
  ASSERT_EQ(Boot("device-0002", "agentic"), "w4a8-amx");
  WaitForRegistered("device-0002");
  agent::testing::WriteTextFile(dir_.Sub("quick.yaml"), R"(id: fidelity-agentic
selector: {match_labels: {workload: agentic}}
action: {set_priority: PRIORITY_FIDELITY}
stages:
  - {percent: 1, min_bake_seconds: 0, min_reporting_devices: 1, report_timeout_seconds: 2}
  - {percent: 100, min_bake_seconds: 0, min_reporting_devices: 1, report_timeout_seconds: 2}
gates: {max_engine_failure_delta: 0.5}
)");
  const ProcessResult created = Ctl({"rollout", "create", "-f", dir_.Sub("quick.yaml")});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  absl::SleepFor(absl::Seconds(3));
  const v1::Rollout quiet = WaitForStatus([](const v1::Rollout& r) { return r.has_members(); });
  EXPECT_EQ(quiet.state(), v1::ROLLOUT_STATE_PROGRESSING) << quiet.state_reason();
  EXPECT_EQ(quiet.members().devices(), 1u);
  EXPECT_EQ(quiet.members().silent(), 0u) << "it has not been told yet";
  const ProcessResult pending = Ctl({"rollout", "status", kRolloutId, "--devices", "--pending"});
  EXPECT_THAT(pending.out, HasSubstr("device-0002"));

  // Told now, and then silent for longer than its timeout: that counts.
  ASSERT_EQ(Boot("device-0002", "agentic"), "w4a16-tinygemm");
  const v1::Rollout silent =
      WaitForStatus([](const v1::Rollout& r) { return r.state() == v1::ROLLOUT_STATE_PAUSED; });
  EXPECT_EQ(silent.members().silent(), 1u);
  EXPECT_THAT(silent.state_reason(), HasSubstr("engine gate: members 1.000"));
}

// Sequential gates, advance at the horizon (the default with them): the
// stage's one member and two control devices report healthy starts, no
// gate can pass on so little, and the stage advances on its own once its
// member has concluded. Before horizons it waited for `rollout advance`.
TEST_F(RolloutEndToEnd, AHealthyStageAdvancesUnattendedAtItsHorizon) {
  for (const char* device : {"device-0002", "device-0028", "device-0001"}) {
    ASSERT_EQ(Boot(device, "agentic"), "w4a8-amx");
    WaitForRegistered(device);
  }
  agent::testing::WriteTextFile(dir_.Sub("horizon.yaml"), R"(id: fidelity-agentic
selector: {match_labels: {workload: agentic}}
action: {set_priority: PRIORITY_FIDELITY}
stages:
  - {percent: 1, min_bake_seconds: 0, min_reporting_devices: 1, report_timeout_seconds: 3600}
  - {percent: 100, min_bake_seconds: 0, min_reporting_devices: 1, report_timeout_seconds: 3600}
gates: {max_engine_failure_delta: 0.5, sequential: {}}
)");
  const ProcessResult created = Ctl({"rollout", "create", "-f", dir_.Sub("horizon.yaml")});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_THAT(created.out, HasSubstr("planned power (engine gate, 80% by the horizon):"));
  EXPECT_THAT(created.out, HasSubstr("stage 1: 1 member, 2 control at 2.0% (assumed)"));
  EXPECT_THAT(created.out, HasSubstr("stage 2: 2 members, 0 control"));

  // The control devices restart on their own build; the member moves.
  for (const char* device : {"device-0028", "device-0001"}) {
    ASSERT_EQ(Boot(device, "agentic"), "w4a8-amx");
    const ProcessResult reported = RunProcess({WEIGHTPATH_AGENT_PATH, "outcome", "--config",
                                               AgentConfig(device, "agentic"), "--outcome",
                                               "engine_started"});
    ASSERT_EQ(reported.exit_code, 0) << reported.err;
  }
  ASSERT_EQ(Boot("device-0002", "agentic"), "w4a16-tinygemm");
  const ProcessResult reported = RunProcess({WEIGHTPATH_AGENT_PATH, "outcome", "--config",
                                             AgentConfig("device-0002", "agentic"), "--outcome",
                                             "engine_started"});
  ASSERT_EQ(reported.exit_code, 0) << reported.err;

  const v1::Rollout advanced =
      WaitForStatus([](const v1::Rollout& r) { return r.current_stage() == 1; });
  EXPECT_EQ(advanced.state(), v1::ROLLOUT_STATE_PROGRESSING);
  // No operator advanced it, and no gate could pass on one member.
  EXPECT_THAT(advanced.state_reason(), HasSubstr("stage 2 of 2"));
  const ProcessResult audit = Ctl({"audit"});
  EXPECT_THAT(audit.out, ::testing::Not(HasSubstr("AdvanceRollout")));
  const ProcessResult view = Ctl({"rollout", "status", kRolloutId});
  EXPECT_THAT(view.out, HasSubstr("(advances there with no failed gate)"));
}

TEST_F(RolloutEndToEnd, OperatorErrorsComeBackWithTheirCodes) {
  agent::testing::WriteTextFile(dir_.Sub("bad.yaml"), "id: x\nstagez: []\n");
  ProcessResult bad = Ctl({"rollout", "create", "-f", dir_.Sub("bad.yaml")});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("rollout.stagez: unknown key"));

  agent::testing::WriteTextFile(dir_.Sub("decreasing.yaml"),
                                "id: x\nselector: {all: true}\naction: {set_priority: PRIORITY_FIDELITY}\n"
                                "stages: [{percent: 50, report_timeout_seconds: 60}, "
                                "{percent: 10, report_timeout_seconds: 60}]\n");
  bad = Ctl({"rollout", "create", "-f", dir_.Sub("decreasing.yaml")});
  EXPECT_EQ(bad.exit_code, 1);  // the server refused it
  EXPECT_THAT(bad.err, HasSubstr("rollout.stages[1].percent"));

  bad = Ctl({"rollout", "pause", "missing"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("missing"));

  server::testing::WriteSecretFileOrDie(dir_.Sub("wrong.token"), "not-the-token\n");
  bad = RunProcess({WEIGHTPATHCTL_PATH, "rollout", "list", "--server", server_->grpc_address(),
                    "--token-file", dir_.Sub("wrong.token")});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("ListRollouts"));
}

}  // namespace
}  // namespace weightpath
