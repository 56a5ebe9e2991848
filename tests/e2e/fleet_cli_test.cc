// The fleet from the command line: devices boot (resolve), their engine
// benchmarks are sent with `weightpath-agent report`, and an operator reads
// the registry, the summary and the verification matrix with weightpathctl.
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

class FleetCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    WriteSecretFileOrDie(dir_.File("wrong-token"), "guess\n");
    auto started = ServerProcess::Start(
        {"--store=sqlite:" + dir_.File("fleet.db"), "--admin_token_file=" + dir_.File("token"),
         "--fleet_refresh_interval=100ms"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    auto stub = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
    for (const char* device : {"arm-1", "arm-2", "arm-3"}) {
      v1::ResolveWeightPathResponse response;
      ASSERT_TRUE(CallResolve(*stub, ArmRequest(device), &response).ok());
      path_ = response.weight_path().name();
      artifact_sha256_ = response.artifact().sha256();
      WriteFileOrDie(dir_.File(absl::StrCat(device, ".yaml")),
                     absl::StrCat("server: ", server_->grpc_address(), "\ndevice_id: ", device,
                                  "\nbudget: 20s\n"));
    }
    ASSERT_TRUE(Eventually([&] { return Ctl({"devices"}).out.find("arm-3") != std::string::npos; }))
        << server_->Log();
  }

  ProcessResult Ctl(std::vector<std::string> args, const std::string& token_file = "token") {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--server=" + server_->grpc_address());
    if (!token_file.empty()) argv.push_back("--token-file=" + dir_.File(token_file));
    return RunProcess(argv);
  }

  ProcessResult Report(const std::string& device, const std::string& json_file) {
    return RunProcess({WEIGHTPATH_AGENT_PATH, "report", "--file", dir_.File(json_file), "--config",
                       dir_.File(device + ".yaml")});
  }

  std::string MeasurementJson(double decode_tok_s) const {
    return absl::StrCat("{\"model\": \"Spark-X2.5-1.7B\", \"path\": \"", path_,
                        "\", \"engine_version\": \"0.9.1\", \"decode_tok_s\": ", decode_tok_s,
                        ", \"threads\": 16, \"fidelity_exact_matches\": 4, "
                        "\"fidelity_prompts\": 12}\n");
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::string path_;
  std::string artifact_sha256_;
};

TEST_F(FleetCliTest, DevicesAndSummaryPrintTablesAndJson) {
  ProcessResult devices = Ctl({"devices"});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, AllOf(HasSubstr("DEVICE"), HasSubstr("CLASS"), HasSubstr("LAST SEEN"),
                                 HasSubstr("arm-1"), HasSubstr("arm64_cpu"), HasSubstr(path_),
                                 HasSubstr("site=lab-a"), HasSubstr("3 devices")));

  ProcessResult json = Ctl({"devices", "-o", "json", "--selector", "site=lab-a", "--since", "1h"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, AllOf(HasSubstr("\"device_id\": \"arm-2\""),
                              HasSubstr("\"hardware_class\": \"arm64_cpu\"")));

  ProcessResult none = Ctl({"devices", "--selector", "site=elsewhere"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_THAT(none.out, HasSubstr("0 devices"));

  ProcessResult summary = Ctl({"summary"});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out, AllOf(HasSubstr("CLASS"), HasSubstr("arm64_cpu"), HasSubstr("TOTAL")));
  ProcessResult summary_json = Ctl({"summary", "-o", "json"});
  ASSERT_EQ(summary_json.exit_code, 0) << summary_json.err;
  EXPECT_THAT(summary_json.out, HasSubstr("\"total_devices\": \"3\""));
}

// A device that went back to another build says so in its report; the
// views show the assignment and what runs side by side.
TEST_F(FleetCliTest, DevicesRunningAnotherBuildThanAssignedAreListedWithWhyAndHowLong) {
  auto stub = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
  v1::ReportOutcomeRequest report;
  report.set_idempotency_key("arm-1/rolled-back");
  report.set_device_id("arm-1");
  report.set_outcome(v1::OUTCOME_ROLLED_BACK);
  report.set_path(path_);
  report.mutable_running()->set_path("w4a8-previous");
  report.mutable_running()->set_model("Spark-X2.5-1.7B");
  report.mutable_running()->set_source(v1::BOOT_SOURCE_SERVER);
  v1::ReportOutcomeResponse response;
  auto context = ContextWithDeadline();
  ASSERT_TRUE(stub->ReportOutcome(context.get(), report, &response).ok());
  report.set_idempotency_key("arm-2/started");
  report.set_device_id("arm-2");
  report.set_outcome(v1::OUTCOME_ENGINE_STARTED);
  report.mutable_running()->set_path(path_);
  report.mutable_running()->set_artifact_sha256(artifact_sha256_);
  context = ContextWithDeadline();
  ASSERT_TRUE(stub->ReportOutcome(context.get(), report, &response).ok());

  // Every answer carries the server's schedule for trying a failed build
  // again (--failed_build_retry_interval, 1 h by default).
  v1::ResolveWeightPathResponse answer;
  ASSERT_TRUE(CallResolve(*stub, ArmRequest("arm-1"), &answer).ok());
  EXPECT_EQ(answer.failed_build_retry_seconds(), 3600u);

  ProcessResult drift = Ctl({"devices", "--drift"});
  ASSERT_EQ(drift.exit_code, 0) << drift.err;
  EXPECT_THAT(drift.out, AllOf(HasSubstr("RUNNING"), HasSubstr("DRIFT"), HasSubstr("arm-1"),
                               HasSubstr("w4a8-previous"), HasSubstr("rolled_back for "),
                               HasSubstr("1 device")));
  EXPECT_THAT(drift.out, Not(HasSubstr("arm-2")));
  ProcessResult all = Ctl({"devices"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, AllOf(HasSubstr("arm-2"), HasSubstr("arm-3"), HasSubstr("3 devices")));

  ProcessResult summary = Ctl({"summary"});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out, AllOf(HasSubstr("ASSIGNED"), HasSubstr("RUNNING"),
                                 HasSubstr("w4a8-previous"), HasSubstr("(not reported)"),
                                 HasSubstr("1 device runs another build than assigned")));

  ProcessResult shown = Ctl({"device", "show", "arm-1"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, AllOf(HasSubstr("running (as the device last reported)"),
                               HasSubstr("w4a8-previous"), HasSubstr("source"),
                               HasSubstr("drift"), HasSubstr("rolled_back for ")));
  ProcessResult json = Ctl({"devices", "--drift", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, AllOf(HasSubstr("\"reason\": \"rolled_back\""),
                              HasSubstr("\"running\"")));
  // A flag that takes no value given one is a usage error.
  EXPECT_EQ(Ctl({"devices", "--drift=yes"}).exit_code, 2);
}

TEST_F(FleetCliTest, AgentReportsTurnIntoVerificationTheOperatorCanRead) {
  WriteFileOrDie(dir_.File("bench.json"), MeasurementJson(31.2));
  for (const char* device : {"arm-1", "arm-2", "arm-3"}) {
    ProcessResult sent = Report(device, "bench.json");
    ASSERT_EQ(sent.exit_code, 0) << sent.err;
    EXPECT_THAT(sent.out, HasSubstr("duplicate=false"));
  }
  // The key is derived from the file, so sending it again is recognised.
  ProcessResult again = Report("arm-1", "bench.json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("duplicate=true"));

  ProcessResult table;
  ASSERT_TRUE(Eventually([&] {
    table = Ctl({"verification"});
    return table.exit_code == 0 &&
           table.out.find("by fleet; 0 of 3 devices regressed") != std::string::npos;
  })) << table.out << table.err;
  EXPECT_THAT(table.out, AllOf(HasSubstr("PATH"), HasSubstr("DECODE TOK/S"), HasSubstr(path_),
                               HasSubstr("Neoverse-N1"), HasSubstr("31.2"), HasSubstr("12/36"),
                               HasSubstr("3 arm64_cpu devices with Neoverse-N1 reported")));
  ProcessResult json = Ctl({"verification", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, AllOf(HasSubstr("\"source\": \"SOURCE_FLEET\""),
                              HasSubstr("\"device_count\": 3")));
}

TEST_F(FleetCliTest, BadInputAndMissingIdentityGetDistinctExitCodes) {
  ProcessResult anonymous = Ctl({"summary"}, /*token_file=*/"");
  EXPECT_EQ(anonymous.exit_code, 1);
  EXPECT_THAT(anonymous.err, HasSubstr("operator identity"));
  ProcessResult wrong = Ctl({"summary"}, "wrong-token");
  EXPECT_EQ(wrong.exit_code, 1);  // the server refused: not a usage error
  EXPECT_THAT(wrong.err,
              AllOf(HasSubstr("FleetSummary: PERMISSION_DENIED: "), HasSubstr("bearer token")));
  ProcessResult since = Ctl({"devices", "--since", "yesterday"});
  EXPECT_EQ(since.exit_code, 2);
  EXPECT_THAT(since.err, HasSubstr("--since"));
  ProcessResult output = Ctl({"verification", "-o", "xml"});
  EXPECT_EQ(output.exit_code, 2);

  WriteFileOrDie(dir_.File("typo.json"), "{\"decode_toks\": 3}");
  ProcessResult typo = Report("arm-1", "typo.json");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("decode_toks"));
  WriteFileOrDie(dir_.File("negative.json"), MeasurementJson(-1));
  ProcessResult negative = Report("arm-1", "negative.json");
  EXPECT_EQ(negative.exit_code, 1);
  EXPECT_THAT(negative.err, HasSubstr("decode_tok_s"));
}

}  // namespace
}  // namespace weightpath::server::testing
