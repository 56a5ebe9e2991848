// The operator views of weightpathctl against the real server: explain,
// device show, rollout status --watch and apply, each run as the real
// binary against weightpath-server with a SQLite fleet store.
#include <signal.h>
#include <sys/stat.h>

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
using weightpath::testing::SpawnOptions;
using weightpath::testing::Subprocess;

// Two stages whose bake the reconciler never finishes in a test, so only
// the operator's advance moves it.
constexpr char kRolloutYaml[] =
    "id: lab-fidelity\n"
    "description: lab devices onto fidelity\n"
    "selector:\n"
    "  match_labels:\n"
    "    site: lab-a\n"
    "action:\n"
    "  set_priority: PRIORITY_FIDELITY\n"
    "stages:\n"
    "  - percent: 50\n"
    "    min_bake_seconds: 3600\n"
    "    min_reporting_devices: 1\n"
    "    report_timeout_seconds: 3600\n"
    "  - percent: 100\n"
    "    min_bake_seconds: 3600\n"
    "    min_reporting_devices: 1\n"
    "    report_timeout_seconds: 3600\n";

class CtlOperatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    auto started = ServerProcess::Start(
        {"--store=sqlite:" + dir_.File("fleet.db"), "--admin_token_file=" + dir_.File("token"),
         "--fleet_refresh_interval=100ms"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    auto stub = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
    for (const char* device : {"arm-1", "arm-2"}) {
      v1::ResolveWeightPathResponse response;
      ASSERT_TRUE(CallResolve(*stub, ArmRequest(device), &response).ok());
      path_ = response.weight_path().name();
    }
    ASSERT_TRUE(Eventually([&] { return Ctl({"devices"}).out.find("arm-2") != std::string::npos; }))
        << server_->Log();
  }

  ProcessResult Ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--server=" + server_->grpc_address());
    argv.push_back("--token-file=" + dir_.File("token"));
    return RunProcess(argv);
  }

  std::unique_ptr<Subprocess> StartCtl(std::vector<std::string> args) {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--server=" + server_->grpc_address());
    argv.push_back("--token-file=" + dir_.File("token"));
    SpawnOptions options;
    options.pipe_stdout = true;
    auto started = Subprocess::Start(argv, options);
    EXPECT_TRUE(started.ok()) << started.status();
    return started.ok() ? *std::move(started) : nullptr;
  }

  void CreateRollout() {
    WriteFileOrDie(dir_.File("rollout.yaml"), kRolloutYaml);
    ProcessResult created = Ctl({"rollout", "create", "-f", dir_.File("rollout.yaml")});
    ASSERT_EQ(created.exit_code, 0) << created.err;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::string path_;
};

TEST_F(CtlOperatorTest, ExplainShowsRulesRolloutVerificationAndPolicyForADevice) {
  ProcessResult table = Ctl({"explain", "arm-1"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out,
              AllOf(HasSubstr("decision for device arm-1"), HasSubstr("hardware class    arm64_cpu"),
                    HasSubstr(path_), HasSubstr("shaped by         no rollout"),
                    HasSubstr("rules tried ("),
                    HasSubstr("arm64-cpu-tinygemm -> w4a16-tinygemm-arm64: matched, chosen"),
                    HasSubstr("verification"), HasSubstr("evidence          none"),
                    HasSubstr("version           sha256:")));

  ProcessResult json = Ctl({"explain", "arm-1", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, AllOf(HasSubstr("\"rule_trace\": ["), HasSubstr("\"policy_version\"")));
  ProcessResult yaml = Ctl({"explain", "arm-1", "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, AllOf(HasSubstr("rule_trace:\n  - "), HasSubstr("hardware_class: \"arm64_cpu\"")));
}

TEST_F(CtlOperatorTest, ExplainAProfileWithLabelsAndPriority) {
  ProcessResult fidelity =
      Ctl({"explain", "--profile", WEIGHTPATH_EXAMPLE_PROFILES_DIR "/intel-sapphire-rapids.json",
           "--labels", "workload=agentic", "--priority", "fidelity"});
  ASSERT_EQ(fidelity.exit_code, 0) << fidelity.err;
  EXPECT_THAT(fidelity.out, AllOf(HasSubstr("decision for profile "), HasSubstr("x86_cpu"),
                                  HasSubstr("priority          fidelity"),
                                  HasSubstr("evidence          policy")));
  EXPECT_THAT(fidelity.out, Not(HasSubstr("registry holds no profile")));
}

// device-0002 has bucket 34 in "fidelity-agentic" (deploy/README.md): a
// member at 1%; arm-1 and arm-2 are its control devices.
TEST_F(CtlOperatorTest, ExplainShowsEachGateOfTheShapingRolloutPerClass) {
  WriteFileOrDie(dir_.File("sequential.yaml"),
                 "id: fidelity-agentic\n"
                 "selector: {match_labels: {site: lab-a}}\n"
                 "action: {set_priority: PRIORITY_FIDELITY}\n"
                 "stages:\n"
                 "  - {percent: 1, min_bake_seconds: 3600, min_reporting_devices: 1,"
                 " report_timeout_seconds: 3600}\n"
                 "  - {percent: 100, min_bake_seconds: 3600, min_reporting_devices: 1,"
                 " report_timeout_seconds: 3600}\n"
                 "gates:\n"
                 "  max_engine_failure_delta: 0.2\n"
                 "  sequential: {false_pause_rate: 0.01}\n");
  ProcessResult created = Ctl({"apply", "-f", dir_.File("sequential.yaml")});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto stub = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
  v1::ResolveWeightPathResponse response;
  ASSERT_TRUE(CallResolve(*stub, ArmRequest("device-0002"), &response).ok());
  ASSERT_EQ(response.rollout().rollout_id(), "fidelity-agentic");
  // The member's engine starts on the rollout's build, a control device's on
  // its own: one class with both sides to compare.
  for (const auto& [device, rollout] : {std::pair<std::string, std::string>{"device-0002", "fidelity-agentic"},
                                        {"arm-1", ""}}) {
    v1::ReportOutcomeRequest outcome;
    outcome.set_idempotency_key("started-" + device);
    outcome.set_device_id(device);
    outcome.set_rollout_id(rollout);
    outcome.set_outcome(v1::OUTCOME_ENGINE_STARTED);
    ASSERT_TRUE(Eventually([&] {
      v1::ReportOutcomeResponse reported;
      auto context = ContextWithDeadline();
      return stub->ReportOutcome(context.get(), outcome, &reported).ok();
    })) << device;
  }

  ProcessResult table;
  ASSERT_TRUE(Eventually([&] {
    table = Ctl({"explain", "device-0002"});
    return table.out.find("0/1 failed") != std::string::npos;
  })) << table.out << table.err << server_->Log();
  EXPECT_THAT(table.out,
              AllOf(HasSubstr("shaped by         fidelity-agentic"), HasSubstr("stage             1 of 2"),
                    HasSubstr("state             PROGRESSING"),
                    HasSubstr("rollout gates (at the last evaluation)"),
                    HasSubstr("GATE"), HasSubstr("VERDICT"), HasSubstr("STATISTIC"),
                    HasSubstr("MEMBERS"), HasSubstr("CONTROL"),
                    HasSubstr("engine delta"), HasSubstr("within"),
                    HasSubstr("engine sequential"), HasSubstr("threshold"),
                    HasSubstr("arm64_cpu"), HasSubstr("0/1 failed"),
                    // What each stage can catch by its horizon, stated at creation.
                    HasSubstr("planned power     stage 1")));

  ProcessResult json = Ctl({"explain", "device-0002", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, AllOf(HasSubstr("\"rollout_detail\": {"), HasSubstr("\"sequential_gates\": ["),
                              HasSubstr("\"hardware_class\": \"arm64_cpu\"")));
  ProcessResult yaml = Ctl({"explain", "device-0002", "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, AllOf(HasSubstr("rollout_detail:"), HasSubstr("sequential_gates:")));

  // A device the rollout does not shape has no detail.
  ProcessResult unshaped = Ctl({"explain", "arm-1", "-o", "json"});
  ASSERT_EQ(unshaped.exit_code, 0) << unshaped.err;
  EXPECT_THAT(unshaped.out, Not(HasSubstr("rollout_detail")));
}

TEST_F(CtlOperatorTest, ExplainRefusalsAndUsageErrorsHaveTheirExitCodes) {
  ProcessResult unknown = Ctl({"explain", "no-such-device"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("ExplainDecision: NOT_FOUND: "));
  EXPECT_EQ(RunProcess({WEIGHTPATHCTL_PATH, "explain"}).exit_code, 2);
  ProcessResult both = Ctl({"explain", "arm-1", "--profile", "x.json"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("not both"));
  ProcessResult labels = Ctl({"explain", "arm-1", "--labels", "a=b"});
  EXPECT_EQ(labels.exit_code, 2);
  EXPECT_THAT(labels.err, HasSubstr("--labels applies to --profile only"));
  ProcessResult output = Ctl({"explain", "arm-1", "-o", "xml"});
  EXPECT_EQ(output.exit_code, 2);
  EXPECT_THAT(output.err, HasSubstr("json, table, yaml"));
}

TEST_F(CtlOperatorTest, DeviceShowHasTheRecordTheLastDecisionAndTheFleetEvidence) {
  ProcessResult before = Ctl({"device", "show", "arm-1"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_THAT(before.out,
              AllOf(HasSubstr("device arm-1\n"), HasSubstr("labels            site=lab-a"),
                    HasSubstr("cpu               Neoverse-N1"), HasSubstr("last decision\n"),
                    HasSubstr("weight path       " + path_), HasSubstr("priority          speed"),
                    HasSubstr("policy version    sha256:"), HasSubstr("rollout           no rollout"),
                    HasSubstr("regressions       none"), HasSubstr("no reports yet for " + path_),
                    HasSubstr(" ago)"),
                    HasSubstr("last measurements (newest received first)\n"
                              "  none              the device has reported none\n"
                              "last outcomes (newest received first)\n"
                              "  none              the device has reported none\n")));

  auto stub = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
  v1::ReportMeasurementResponse reported;
  ASSERT_TRUE(Report(*stub, Measurement("m-1", "arm-1", path_, 31.2, 16), &reported).ok());
  ProcessResult after;
  ASSERT_TRUE(Eventually([&] {
    after = Ctl({"device", "show", "arm-1"});
    return after.out.find("1 device reported") != std::string::npos;
  })) << after.out << after.err;
  EXPECT_THAT(after.out, AllOf(HasSubstr("median 31.2 tok/s (min 31.2, max 31.2, 1 sample)"),
                               HasSubstr("3 of 12 prompts exact")));
  // The device's own reports, its text shown with control characters
  // escaped: a newline in a detail cannot forge a line of the view, nor a C1
  // CSI (U+009B) drive the terminal or a bidi override (U+202E) reorder it.
  v1::ReportOutcomeRequest outcome;
  outcome.set_idempotency_key("started-arm-1");
  outcome.set_device_id("arm-1");
  outcome.set_outcome(v1::OUTCOME_ENGINE_STARTED);
  outcome.set_path(path_);
  outcome.set_detail("engine up\nrollout           forged\x1b[2J\xc2\x9b" "2J\xe2\x80\xae" "dlrow");
  v1::ReportOutcomeResponse outcome_reported;
  {
    auto context = ContextWithDeadline();
    ASSERT_TRUE(stub->ReportOutcome(context.get(), outcome, &outcome_reported).ok());
  }
  ProcessResult reports = Ctl({"device", "show", "arm-1"});
  ASSERT_EQ(reports.exit_code, 0) << reports.err;
  EXPECT_THAT(reports.out,
              AllOf(HasSubstr("last measurements (newest received first)\n  20"),
                    HasSubstr(path_ + ": decode 31.2 tok/s, prefill 0.0 tok/s, gemm 0.0 ms/step, "
                                      "step 0.0 ms, 16 threads, fidelity 3 of 12 exact, engine 0.9.1"),
                    HasSubstr("last outcomes (newest received first)\n  20"),
                    HasSubstr("engine_started: path " + path_ + ", rollout none, policy -, "
                              "detail \"engine up\\x0arollout           forged\\x1b[2J"
                              "\\u009b2J\\u202edlrow\"\n"),
                    Not(HasSubstr("\nrollout           forged")), Not(HasSubstr("\x1b")),
                    Not(HasSubstr("\xc2\x9b")), Not(HasSubstr("\xe2\x80\xae"))));

  ProcessResult yaml = Ctl({"device", "show", "arm-1", "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, AllOf(HasSubstr("device:\n  device_id: \"arm-1\""),
                              HasSubstr("verification:\n  cells:\n"),
                              HasSubstr("recent_measurements:"), HasSubstr("recent_outcomes:")));
  ProcessResult json = Ctl({"device", "show", "arm-1", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, AllOf(HasSubstr("\"device\": {"), HasSubstr("\"recent_measurements\": ["),
                              HasSubstr("\"decode_tok_s\": 31.2"),
                              HasSubstr("\"recent_outcomes\": ["),
                              HasSubstr("\"outcome\": \"OUTCOME_ENGINE_STARTED\""),
                              HasSubstr("\"detail\": \"engine up\\nrollout")));
}

TEST_F(CtlOperatorTest, DeviceShowRefusalsAndUsageErrors) {
  ProcessResult unknown = Ctl({"device", "show", "no-such-device"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("GetDevice: NOT_FOUND: "));
  EXPECT_EQ(RunProcess({WEIGHTPATHCTL_PATH, "device"}).exit_code, 2);
  ProcessResult no_id = Ctl({"device", "show"});
  EXPECT_EQ(no_id.exit_code, 2);
  EXPECT_THAT(no_id.err, HasSubstr("needs the device ID"));
  EXPECT_EQ(Ctl({"device", "list"}).exit_code, 2);
  ProcessResult help = RunProcess({WEIGHTPATHCTL_PATH, "device", "show", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, AllOf(HasSubstr("last measurements and last outcomes"),
                              Not(HasSubstr("Not shown"))));
}

TEST_F(CtlOperatorTest, RolloutWatchPrintsEachChangeAndExitsZeroWhenTheRolloutCompletes) {
  ASSERT_NO_FATAL_FAILURE(CreateRollout());
  std::unique_ptr<Subprocess> watch =
      StartCtl({"rollout", "status", "lab-fidelity", "--watch", "--interval", "100ms"});
  ASSERT_NE(watch, nullptr);
  ASSERT_TRUE(watch->WaitForLine("rollout lab-fidelity: PROGRESSING", absl::Seconds(20)).ok());
  ASSERT_TRUE(watch->WaitForLine("  stage:     1 of 2 at 50%", absl::Seconds(5)).ok());
  ASSERT_EQ(Ctl({"rollout", "advance", "lab-fidelity"}).exit_code, 0);
  ASSERT_TRUE(watch->WaitForLine("  stage:     2 of 2 at 100%", absl::Seconds(20)).ok());
  ASSERT_EQ(Ctl({"rollout", "advance", "lab-fidelity", "--reason", "done"}).exit_code, 0);
  absl::StatusOr<std::string> completed =
      watch->WaitForLine("rollout lab-fidelity: COMPLETED", absl::Seconds(20));
  ASSERT_TRUE(completed.ok()) << completed.status();
  EXPECT_THAT(*completed, HasSubstr("completed by operator: done"));
  EXPECT_EQ(watch->Wait(absl::Seconds(20)).exit_code, 0);
}

TEST_F(CtlOperatorTest, RolloutWatchExitsOneWhenPausedAnd130OnCtrlC) {
  ASSERT_NO_FATAL_FAILURE(CreateRollout());
  std::unique_ptr<Subprocess> paused = StartCtl({"rollout", "status", "lab-fidelity", "-w"});
  ASSERT_NE(paused, nullptr);
  ASSERT_TRUE(paused->WaitForLine("rollout lab-fidelity: PROGRESSING", absl::Seconds(20)).ok());
  ASSERT_EQ(Ctl({"rollout", "pause", "lab-fidelity", "--reason", "look first"}).exit_code, 0);
  ASSERT_TRUE(paused->WaitForLine("rollout lab-fidelity: PAUSED (", absl::Seconds(20)).ok());
  EXPECT_EQ(paused->Wait(absl::Seconds(20)).exit_code, 1);

  ASSERT_EQ(Ctl({"rollout", "resume", "lab-fidelity"}).exit_code, 0);
  std::unique_ptr<Subprocess> interrupted =
      StartCtl({"rollout", "status", "lab-fidelity", "--watch", "--interval", "1h"});
  ASSERT_NE(interrupted, nullptr);
  ASSERT_TRUE(interrupted->WaitForLine("rollout lab-fidelity: PROGRESSING", absl::Seconds(20)).ok());
  interrupted->Signal(SIGINT);
  EXPECT_EQ(interrupted->Wait(absl::Seconds(10)).exit_code, 130);

  ProcessResult bad_interval = Ctl({"rollout", "status", "lab-fidelity", "-w", "--interval", "soon"});
  EXPECT_EQ(bad_interval.exit_code, 2);
  EXPECT_THAT(bad_interval.err, HasSubstr("--interval"));
  ProcessResult missing = Ctl({"rollout", "status", "no-such-rollout", "--watch"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("GetRollout: NOT_FOUND: "));
}

TEST_F(CtlOperatorTest, ApplyCreatesUpdatesAndLeavesUnchangedNamingTheChangedFields) {
  const std::string folder = dir_.File("rollouts");
  ASSERT_EQ(mkdir(folder.c_str(), 0700), 0);
  WriteFileOrDie(folder + "/b.yml", kRolloutYaml);
  std::string other = kRolloutYaml;
  other.replace(other.find("id: lab-fidelity"), 16, "id: lab-first");
  WriteFileOrDie(folder + "/a.yaml", other);
  WriteFileOrDie(folder + "/notes.txt", "not a rollout");

  ProcessResult first = Ctl({"apply", "-f", folder});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out,
            "rollout/lab-first created (" + folder + "/a.yaml)\n"
            "rollout/lab-fidelity created (" + folder + "/b.yml)\n"
            "2 rollouts: 2 created, 0 updated, 0 unchanged, 0 refused, 0 failed\n");
  EXPECT_THAT(Ctl({"rollout", "list"}).out, AllOf(HasSubstr("lab-first"), HasSubstr("lab-fidelity")));

  ProcessResult again = Ctl({"apply", "-f", folder});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, AllOf(HasSubstr("rollout/lab-first unchanged"),
                               HasSubstr("rollout/lab-fidelity unchanged"),
                               HasSubstr("0 created, 0 updated, 2 unchanged")));

  // What a running rollout can take in place: a description, a later
  // stage's bake. It keeps its stage and counts.
  std::string changed = other;
  changed.replace(changed.find("lab devices onto fidelity"), 25, "a new description");
  changed.replace(changed.rfind("min_bake_seconds: 3600"), 22, "min_bake_seconds: 600");
  WriteFileOrDie(folder + "/a.yaml", changed);
  ProcessResult updated = Ctl({"apply", "-f", folder});
  ASSERT_EQ(updated.exit_code, 0) << updated.err;
  EXPECT_THAT(updated.out,
              AllOf(HasSubstr("rollout/lab-first updated: description, stages (" + folder + "/a.yaml)"),
                    HasSubstr("rollout/lab-fidelity unchanged"),
                    HasSubstr("0 created, 1 updated, 1 unchanged, 0 refused, 0 failed")));
  ProcessResult status = Ctl({"rollout", "status", "lab-first"});
  EXPECT_THAT(status.out, AllOf(HasSubstr("a new description"), HasSubstr("PROGRESSING"),
                                HasSubstr("stage:     1 of 2 at 50%")));
  ProcessResult idempotent = Ctl({"apply", "-f", folder});
  ASSERT_EQ(idempotent.exit_code, 0) << idempotent.err;
  EXPECT_THAT(idempotent.out, HasSubstr("0 updated, 2 unchanged"));

  // The percent of the stage it is in would move devices in or out of it:
  // the server refuses, and apply names the field and the code.
  changed.replace(changed.find("percent: 50"), 11, "percent: 25");
  WriteFileOrDie(folder + "/a.yaml", changed);
  ProcessResult refused = Ctl({"apply", "-f", folder});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, AllOf(HasSubstr("rollout 'lab-first' differs in stages"),
                                 HasSubstr("UpdateRollout: FAILED_PRECONDITION"),
                                 HasSubstr("rollout.stages[0].percent")));
  EXPECT_THAT(refused.out, AllOf(HasSubstr("rollout/lab-fidelity unchanged"),
                                 HasSubstr("0 updated, 1 unchanged, 1 refused")));
}

TEST_F(CtlOperatorTest, RolloutDeleteTakesAFinishedRolloutAndItsIdCanBeAppliedAgain) {
  CreateRollout();
  ProcessResult running = Ctl({"rollout", "delete", "lab-fidelity"});
  EXPECT_EQ(running.exit_code, 1);
  EXPECT_THAT(running.err, AllOf(HasSubstr("DeleteRollout: FAILED_PRECONDITION"),
                                 HasSubstr("PROGRESSING"), HasSubstr("abort it first")));
  ASSERT_EQ(Ctl({"rollout", "abort", "lab-fidelity"}).exit_code, 0);
  ProcessResult deleted = Ctl({"rollout", "delete", "lab-fidelity"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_THAT(deleted.out, HasSubstr("rollout/lab-fidelity deleted (it was ABORTED)"));
  ProcessResult gone = Ctl({"rollout", "status", "lab-fidelity"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("GetRollout: NOT_FOUND"));
  EXPECT_THAT(Ctl({"rollout", "delete", "lab-fidelity"}).err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(Ctl({"rollout", "delete"}).exit_code, 2);

  ProcessResult reapplied = Ctl({"apply", "-f", dir_.File("rollout.yaml")});
  ASSERT_EQ(reapplied.exit_code, 0) << reapplied.err;
  EXPECT_THAT(reapplied.out, HasSubstr("rollout/lab-fidelity created"));
  EXPECT_THAT(Ctl({"rollout", "status", "lab-fidelity"}).out, HasSubstr("PROGRESSING"));
}

TEST_F(CtlOperatorTest, ApplyRefusesFieldsTheServerSetsWithFileAndLineAndAppliesNothing) {
  WriteFileOrDie(dir_.File("good.yaml"), kRolloutYaml);
  WriteFileOrDie(dir_.File("state.yaml"),
                 "id: claims-done\nselector: {all: true}\ncurrent_stage: 1\n");
  ProcessResult refused = Ctl({"apply", "-f", dir_.File("state.yaml")});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, AllOf(HasSubstr("state.yaml:3:"), HasSubstr("rollout.current_stage"),
                                 HasSubstr("is set by the server"),
                                 HasSubstr("nothing applied")));
  EXPECT_THAT(Ctl({"rollout", "list"}).out, HasSubstr("no rollouts"));
  EXPECT_EQ(RunProcess({WEIGHTPATHCTL_PATH, "apply"}).exit_code, 2);
  EXPECT_EQ(Ctl({"apply", "-f", dir_.File("missing.yaml")}).exit_code, 2);
}

}  // namespace
}  // namespace weightpath::server::testing
