// One command-line convention for every weightpathctl command, checked
// against the real weightpath-server binary with a SQLite file and a
// PostgreSQL database as its fleet store: exit 0
// on success, 1 when the server refused or failed (the line names the gRPC
// code), 2 for a command line to fix; -o table|json|yaml; devices --class
// checked against the hardware classes the policy library knows, locally and
// by the server; and the verification listing of the policy's verified paths
// with the fleet's regressions beside them.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_violation.h"
#include "common/grpc_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/hardware_class.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/store/store_backends.h"
#include "tests/support/subprocess.h"

namespace weightpath::server::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using weightpath::testing::ProcessResult;
using weightpath::testing::RunProcess;
using store::testing::Backend;
using store::testing::BackendName;
using store::testing::FreshDatabaseUrl;

constexpr char kRolloutYaml[] =
    "id: lab-fidelity\n"
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

// Accepted by weightpathctl (it parses) and refused by the server (stages
// must grow): a server refusal of a well-formed command line.
constexpr char kShrinkingRolloutYaml[] =
    "id: shrinking\n"
    "selector: {all: true}\n"
    "action: {set_priority: PRIORITY_FIDELITY}\n"
    "stages: [{percent: 50, report_timeout_seconds: 60},\n"
    "         {percent: 10, report_timeout_seconds: 60}]\n";

class CtlConventionsTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
    ASSERT_TRUE(url.ok()) << url.status();
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    WriteSecretFileOrDie(dir_.File("wrong-token"), "not-the-token\n");
    auto started = ServerProcess::Start({"--store=" + *url,
                                         "--admin_token_file=" + dir_.File("token"),
                                         "--fleet_refresh_interval=100ms"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    stub_ = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
    v1::ResolveWeightPathResponse response;
    ASSERT_TRUE(CallResolve(*stub_, ArmRequest("arm-1"), &response).ok());
    ASSERT_TRUE(Eventually([&] { return Ctl({"devices"}).out.find("arm-1") != std::string::npos; }))
        << server_->Log();
    WriteFileOrDie(dir_.File("rollout.yaml"), kRolloutYaml);
    WriteFileOrDie(dir_.File("shrinking.yaml"), kShrinkingRolloutYaml);
    WriteFileOrDie(dir_.File("bad.yaml"), "id: x\nstagez: []\n");
    WriteFileOrDie(dir_.File("riscv.json"), "{\"arch\": \"riscv64\", \"accelerator\": \"none\"}\n");
  }

  // With the server and the token file appended; token "" appends neither
  // (resolve takes no token, and --offline no server).
  ProcessResult Ctl(std::vector<std::string> args, const std::string& token = "token") {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    if (!token.empty()) {
      argv.push_back("--server=" + server_->grpc_address());
      argv.push_back("--token-file=" + dir_.File(token));
    }
    return RunProcess(argv);
  }

  std::string Profile(const std::string& name) const {
    return absl::StrCat(WEIGHTPATH_EXAMPLE_PROFILES_DIR, "/", name, ".json");
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::WeightPath::Stub> stub_;
};

struct Case {
  std::vector<std::string> args;
  const char* token;       // token file under the test's directory; "": see Ctl
  int exit_code;
  const char* stderr_has;  // "" when any message will do
};

TEST_P(CtlConventionsTest, EveryCommandExitsZeroOnSuccessOneOnARefusalAndTwoOnUsage) {
  const std::string profile = Profile("amd-zen4");
  const std::string rollout = dir_.File("rollout.yaml");
  const std::string server = "--server=" + server_->grpc_address();
  const std::vector<Case> cases = {
      // Success.
      {{"devices"}, "token", 0, ""},
      {{"devices", "--class", "arm64_cpu", "-o", "yaml"}, "token", 0, ""},
      {{"summary", "-o", "json"}, "token", 0, ""},
      {{"verification", "-o", "yaml"}, "token", 0, ""},
      {{"resolve", server, "--profile", profile}, "", 0, ""},
      {{"resolve", "--offline", "--profile", profile}, "", 0, ""},
      {{"explain", "arm-1"}, "token", 0, ""},
      {{"device", "show", "arm-1"}, "token", 0, ""},
      {{"rollout", "create", "-f", rollout}, "token", 0, ""},
      {{"rollout", "list"}, "token", 0, ""},
      {{"rollout", "status", "lab-fidelity"}, "token", 0, ""},
      {{"rollout", "pause", "lab-fidelity"}, "token", 0, ""},
      {{"rollout", "resume", "lab-fidelity"}, "token", 0, ""},
      {{"apply", "-f", rollout}, "token", 0, ""},
      {{"paths", "--profile", profile, "-o", "yaml"}, "token", 0, ""},
      {{"audit", "-o", "json"}, "token", 0, ""},
      {{"help"}, "token", 0, ""},

      // The server refused: 1, naming the RPC and the gRPC code, whatever
      // the code (INVALID_ARGUMENT and NOT_FOUND included).
      {{"devices"}, "wrong-token", 1, "ListDevices: PERMISSION_DENIED: "},
      {{"summary"}, "wrong-token", 1, "FleetSummary: PERMISSION_DENIED: "},
      {{"verification"}, "wrong-token", 1, "GetVerificationMatrix: PERMISSION_DENIED: "},
      {{"rollout", "list"}, "wrong-token", 1, "ListRollouts: PERMISSION_DENIED: "},
      {{"rollout", "status", "missing"}, "token", 1, "GetRollout: NOT_FOUND: "},
      {{"rollout", "pause", "missing"}, "token", 1, "PauseRollout: NOT_FOUND: "},
      {{"rollout", "abort", "missing"}, "token", 1, "AbortRollout: NOT_FOUND: "},
      {{"rollout", "advance", "missing"}, "token", 1, "AdvanceRollout: NOT_FOUND: "},
      {{"rollout", "resume", "missing"}, "token", 1, "ResumeRollout: NOT_FOUND: "},
      {{"rollout", "create", "-f", dir_.File("shrinking.yaml")},
       "token", 1, "CreateRollout: INVALID_ARGUMENT: rollout.stages[1].percent"},
      {{"resolve", server, "--profile", dir_.File("riscv.json")},
       "", 1, "ResolveWeightPath: INVALID_ARGUMENT: "},
      {{"explain", "nobody"}, "token", 1, "NOT_FOUND"},
      {{"device", "show", "nobody"}, "token", 1, "NOT_FOUND"},
      {{"apply", "-f", rollout}, "wrong-token", 1, "GetRollout: PERMISSION_DENIED: "},
      {{"paths", "--profile", profile}, "wrong-token", 1, "ExplainDecision: PERMISSION_DENIED: "},
      {{"audit"}, "wrong-token", 1, "ListAuditEvents: PERMISSION_DENIED: "},

      // Usage: the command line (or an input file it names) is wrong.
      {{"devices", "--bogus"}, "token", 2, "unknown flag"},
      {{"devices", "-o", "xml"}, "token", 2, "-o/--output 'xml' is not one of: json, table, yaml"},
      {{"summary", "--since", "yesterday"}, "token", 2, "--since"},
      {{"verification", "extra"}, "token", 2, ""},
      {{"resolve", server}, "", 2, "--profile FILE is required"},
      {{"resolve", server, "--profile", dir_.File("missing.json")}, "", 2, "no such file"},
      {{"resolve", "--offline", "--profile", dir_.File("riscv.json")}, "", 2, "profile.arch"},
      {{"explain"}, "token", 2, ""},
      {{"device"}, "token", 2, ""},
      {{"rollout"}, "token", 2, ""},
      {{"rollout", "frobnicate"}, "token", 2, "unknown action"},
      {{"rollout", "status"}, "token", 2, "needs the rollout ID"},
      {{"rollout", "create"}, "token", 2, "-f FILE is required"},
      {{"rollout", "create", "-f", dir_.File("bad.yaml")}, "token", 2, "rollout.stagez"},
      {{"rollout", "status", "lab-fidelity", "--interval", "2s"},
       "token", 2, "--interval applies to --watch only"},
      {{"apply"}, "token", 2, "-f FILE|DIR is required"},
      {{"apply", "-f", dir_.File("missing.yaml")}, "token", 2, ""},
      {{"paths"}, "token", 2, "--profile"},
      {{"paths", "--profile", profile, "-o", "xml"}, "token", 2, "-o/--output 'xml'"},
      {{"audit", "--since", "yesterday"}, "token", 2, "--since"},
      {{"repo"}, "token", 2, ""},
      {{"repo", "frobnicate"}, "token", 2, "unknown action"},
      {{"frobnicate"}, "token", 2, "unknown command 'frobnicate'"},
  };
  for (const Case& each : cases) {
    const std::string line = absl::StrJoin(each.args, " ");
    const ProcessResult run = Ctl(each.args, each.token);
    EXPECT_EQ(run.exit_code, each.exit_code) << line << " with " << each.token << ": " << run.err;
    EXPECT_THAT(run.err, HasSubstr(each.stderr_has)) << line;
    if (each.exit_code != 0) {
      EXPECT_THAT(run.err, HasSubstr("weightpathctl")) << line;
    }
  }
  // No arguments at all is a usage error too.
  const ProcessResult bare = RunProcess({WEIGHTPATHCTL_PATH});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_THAT(bare.err, HasSubstr("usage: weightpathctl <command>"));
  // An unreachable server is a failure, not a usage error.
  const ProcessResult unreachable =
      RunProcess({WEIGHTPATHCTL_PATH, "summary", "--server=127.0.0.1:1", "--timeout=2",
                  "--token-file=" + dir_.File("token")});
  EXPECT_EQ(unreachable.exit_code, 1) << unreachable.err;
  EXPECT_THAT(unreachable.err, HasSubstr("FleetSummary: UNAVAILABLE: "));
}

TEST_P(CtlConventionsTest, DevicesClassIsOneTheCodeKnowsLocallyAndOnTheServer) {
  std::vector<std::string> known;
  for (policy::HardwareClass each : policy::kAllHardwareClasses) {
    known.emplace_back(policy::HardwareClassName(each));
  }
  const ProcessResult typo = Ctl({"devices", "--class", "arm64"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr(absl::StrCat("--class 'arm64' is not a hardware class; one of: ",
                                               absl::StrJoin(known, ", "))));
  const ProcessResult help = Ctl({"devices", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, AllOf(HasSubstr(absl::StrJoin(known, ", ")), HasSubstr("table|json|yaml")));

  for (const std::string& each : known) {
    const ProcessResult listed = Ctl({"devices", "--class", each});
    EXPECT_EQ(listed.exit_code, 0) << each << ": " << listed.err;
  }
  const ProcessResult arm = Ctl({"devices", "--class", "arm64_cpu"});
  EXPECT_THAT(arm.out, AllOf(HasSubstr("arm-1"), HasSubstr("1 device\n")));

  // The server refuses it too, naming the field, for any client.
  auto admin = v1::FleetAdmin::NewStub(PlaintextChannel(server_->grpc_address()));
  v1::ListDevicesRequest request;
  request.set_hardware_class("arm64");
  v1::ListDevicesResponse response;
  auto context = AdminContext();
  const grpc::Status sent = admin->ListDevices(context.get(), request, &response);
  const absl::Status refused = FromGrpcStatus("ListDevices", sent, *context);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ViolatedField(refused), "hardware_class");
  EXPECT_THAT(refused.message(), HasSubstr("hardware_class 'arm64'"));
}

TEST_P(CtlConventionsTest, VerificationListsThePolicysPathsWithTheFleetsRegressionsBesideThem) {
  // Two Sapphire Rapids devices on w4a8-amx, which the policy marks as
  // measured on x86_cpu: one at the expected 86.6 tok/s, one at half of it
  // (24 threads, as the policy's figure).
  std::string path;
  for (const char* device : {"spr-1", "spr-2"}) {
    v1::ResolveWeightPathResponse response;
    ASSERT_TRUE(CallResolve(*stub_, AmxRequest(device), &response).ok());
    path = response.weight_path().name();
  }
  ASSERT_EQ(path, "w4a8-amx");
  ASSERT_TRUE(Eventually([&] { return Ctl({"devices"}).out.find("spr-2") != std::string::npos; }));
  v1::ReportMeasurementResponse reported;
  ASSERT_TRUE(Report(*stub_, Measurement("k1", "spr-1", path, 86.6, 24), &reported).ok());
  EXPECT_FALSE(reported.regression());
  ASSERT_TRUE(Report(*stub_, Measurement("k2", "spr-2", path, 43.0, 24), &reported).ok());
  EXPECT_TRUE(reported.regression()) << reported.regression_reason();

  const ProcessResult table = Ctl({"verification"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  // The fleet's cell: verified by the policy, the regressed device beside it.
  EXPECT_THAT(table.out, HasSubstr("by policy; 1 of 2 devices regressed"));
  // The policy's verified paths that no device reported are listed too.
  EXPECT_THAT(table.out, AllOf(HasSubstr("export-qnn-w8a16"), HasSubstr("npu_phone"),
                               HasSubstr("cuda_discrete"), HasSubstr("w4a16-tinygemm"),
                               HasSubstr("by policy; no fleet reports")));

  const ProcessResult json = Ctl({"verification", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, AllOf(HasSubstr("\"source\": \"SOURCE_POLICY\""),
                              HasSubstr("\"device_count\": 0"),
                              HasSubstr("as measured on x86_cpu; 1 of 2 devices regressed")));
  const ProcessResult yaml = Ctl({"verification", "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, AllOf(HasSubstr("cells:"), HasSubstr("source: \"SOURCE_POLICY\"")));
}

INSTANTIATE_TEST_SUITE_P(Backends, CtlConventionsTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const auto& info) { return BackendName(info.param); });

}  // namespace
}  // namespace weightpath::server::testing
