// weightpathctl resolve, driven as operators drive it: the real binary, real
// files, exit codes and output checked.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/support/subprocess.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::ctl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;

std::string ExampleProfile(const std::string& name) {
  return std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/" + name + ".json";
}

ProcessResult Ctl(std::vector<std::string> args) {
  args.insert(args.begin(), WEIGHTPATHCTL_PATH);
  return RunProcess(args);
}

// A file under the test's temp dir holding `text`, removed when the test ends.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : path_(::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ExampleCase {
  std::string profile;
  std::string priority;
  std::string hardware_class;
  std::string path_name;
  std::string path_id;
  std::string matched_rule;
  std::string engine_quantization;  // empty: {}
};

// Names the case in test output instead of dumping its bytes.
void PrintTo(const ExampleCase& example, std::ostream* out) {
  *out << example.profile << " " << example.priority;
}

class CtlResolveExampleTest : public ::testing::TestWithParam<ExampleCase> {};

TEST_P(CtlResolveExampleTest, JsonOutputIsAFullResponse) {
  const ExampleCase& example = GetParam();
  ProcessResult run = Ctl({"resolve", "--offline", "--profile", ExampleProfile(example.profile),
                           "--priority", example.priority, "-o", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");

  v1::ResolveWeightPathResponse response;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &response).ok()) << run.out;
  EXPECT_EQ(response.hardware_class(), example.hardware_class);
  EXPECT_EQ(response.weight_path().name(), example.path_name);
  EXPECT_EQ(response.weight_path().path_id(), example.path_id);
  EXPECT_EQ(response.matched_rule(), example.matched_rule);
  EXPECT_EQ(response.effective_priority(),
            example.priority == "fidelity" ? v1::PRIORITY_FIDELITY : v1::PRIORITY_SPEED);
  EXPECT_EQ(response.policy_version(), policy::DefaultPolicy()->version());
  EXPECT_EQ(response.artifact().uri(), "");
  if (example.engine_quantization.empty()) {
    EXPECT_EQ(response.engine_kwargs().fields_size(), 0);
  } else {
    ASSERT_EQ(response.engine_kwargs().fields_size(), 1);
    EXPECT_EQ(response.engine_kwargs().fields().at("quantization").string_value(),
              example.engine_quantization);
  }
  // The same decision the library makes, field for field.
  const policy::PathDefinition* path = policy::DefaultPolicy()->FindPath(example.path_id);
  ASSERT_NE(path, nullptr);
  v1::WeightPathSpec expected_spec;
  policy::FillWeightPathSpec(*path, &expected_spec);
  EXPECT_EQ(response.weight_path().SerializeAsString(), expected_spec.SerializeAsString());
}

INSTANTIATE_TEST_SUITE_P(
    ExampleProfiles, CtlResolveExampleTest,
    ::testing::Values(
        ExampleCase{"intel-sapphire-rapids", "speed", "x86_cpu", "w4a8-amx", "w4a8-amx", "x86-amx-speed", "gptq"},
        ExampleCase{"intel-sapphire-rapids", "fidelity", "x86_cpu", "w4a16-tinygemm", "w4a16-tinygemm-x86", "x86-tinygemm", "cpu_int4"},
        ExampleCase{"amd-zen4", "speed", "x86_cpu", "w4a16-tinygemm", "w4a16-tinygemm-x86", "x86-tinygemm", "cpu_int4"},
        ExampleCase{"aws-graviton3", "speed", "arm64_cpu", "w4a16-tinygemm", "w4a16-tinygemm-arm64", "arm64-cpu-tinygemm", "cpu_int4"},
        ExampleCase{"raspberry-pi-5", "fidelity", "arm64_cpu", "w4a16-tinygemm", "w4a16-tinygemm-arm64", "arm64-cpu-tinygemm", "cpu_int4"},
        ExampleCase{"jetson-agx-orin", "speed", "jetson", "bf16", "bf16-jetson", "jetson-bf16", ""},
        ExampleCase{"rtx-4090", "speed", "cuda_discrete", "bf16", "bf16-cuda", "cuda-discrete-bf16", ""},
        ExampleCase{"tesla-t4", "speed", "cuda_discrete", "fp16", "fp16-cuda", "cuda-discrete-fp16", ""},
        ExampleCase{"snapdragon-8gen2", "fidelity", "npu_phone", "export-qnn-w8a16", "export-qnn-w8a16", "npu-phone-export", ""}),
    [](const auto& info) {
      std::string name = info.param.profile + "_" + info.param.priority;
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name;
    });

TEST(CtlResolveTest, JsonUsesProtoFieldNamesAndPrintsDefaults) {
  ProcessResult run = Ctl({"resolve", "--offline", "--profile", ExampleProfile("tesla-t4"),
                           "-o", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* field : {"\"hardware_class\"", "\"weight_path\"", "\"engine_kwargs\": {}",
                            "\"fused_cpu_norms\": false", "\"build_with\": \"\"",
                            "\"effective_priority\": \"PRIORITY_SPEED\"", "\"policy_version\"",
                            "\"matched_rule\"", "\"path_id\": \"fp16-cuda\""}) {
    EXPECT_THAT(run.out, HasSubstr(field));
  }
}

TEST(CtlResolveTest, TextOutputIsAFewHumanLines) {
  ProcessResult run = Ctl({"resolve", "--offline", "--profile",
                           ExampleProfile("intel-sapphire-rapids"), "--priority", "Fidelity"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, AllOf(HasSubstr("hardware class  x86_cpu"),
                             HasSubstr("weight path     w4a16-tinygemm"),
                             HasSubstr("priority        fidelity"),
                             HasSubstr("engine kwargs   {\"quantization\":\"cpu_int4\"}")));
}

TEST(CtlResolveTest, CustomPolicyAndLabels) {
  TempFile policy_path_file("agentic.yaml", R"(schema: 1
paths:
  - {id: faithful, name: w4a16-tinygemm, quantization: cpu_int4, group_size: 128, bits_per_weight: 4.25, rationale: keeps bf16 activations}
  - {id: fast, name: w4a8-amx, quantization: gptq, group_size: 128, bits_per_weight: 4.25, rationale: fastest}
rules:
  - name: agentic-devices-want-fidelity
    match: {labels: {workload: agentic}}
    path: faithful
  - name: everything-else
    path: fast
)");
  const std::string& policy_path = policy_path_file.path();
  ProcessResult agentic = Ctl({"resolve", "--offline", "--profile", ExampleProfile("amd-zen4"),
                               "--policy", policy_path, "--labels", "workload=agentic,site=lab",
                               "-o", "json"});
  ASSERT_EQ(agentic.exit_code, 0) << agentic.err;
  v1::ResolveWeightPathResponse response;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(agentic.out, &response).ok());
  EXPECT_EQ(response.matched_rule(), "agentic-devices-want-fidelity");
  EXPECT_EQ(response.weight_path().path_id(), "faithful");
  EXPECT_NE(response.policy_version(), policy::DefaultPolicy()->version());

  ProcessResult chat = Ctl({"resolve", "--offline", "--profile", ExampleProfile("amd-zen4"),
                            "--policy", policy_path, "--labels", "workload=chat", "-o", "json"});
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(chat.out, &response).ok());
  EXPECT_EQ(response.matched_rule(), "everything-else");
}

// Bad input: exit 2, nothing on stdout, exactly one line on stderr naming
// the problem.
void ExpectUsageError(const ProcessResult& run, const std::string& message) {
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_THAT(run.err, StartsWith("weightpathctl"));
  EXPECT_THAT(run.err, HasSubstr(message));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST(CtlResolveErrorTest, MissingProfileFile) {
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", "/nonexistent/device.json"}),
                   "/nonexistent/device.json: no such file");
}

TEST(CtlResolveErrorTest, InvalidProfileJson) {
  TempFile path_file("broken.json", "{\"arch\": \"x86_64\",");
  const std::string& path = path_file.path();
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", path}),
                   path + ": not valid JSON");
}

TEST(CtlResolveErrorTest, ProfileFieldOfTheWrongType) {
  TempFile path_file("typed.json", "{\"arch\": \"x86_64\", \"cpu_flags\": 7}");
  const std::string& path = path_file.path();
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", path}),
                   "field 'cpu_flags': expected a list, got a number");
}

TEST(CtlResolveErrorTest, ProfileOfAnUnknownCpu) {
  TempFile path_file("riscv.json", "{\"arch\": \"riscv64\", \"accelerator\": \"none\"}");
  const std::string& path = path_file.path();
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", path}), "profile.arch 'riscv64'");
}

TEST(CtlResolveErrorTest, UnknownPriority) {
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", ExampleProfile("amd-zen4"),
                        "--priority", "fast"}),
                   "priority 'fast' is not one of: speed, fidelity");
}

TEST(CtlResolveErrorTest, BadLabels) {
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", ExampleProfile("amd-zen4"),
                        "--labels", "workload"}),
                   "labels: item 'workload' is not key=value");
}

TEST(CtlResolveErrorTest, UnknownFlag) {
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", ExampleProfile("amd-zen4"),
                        "--prority", "speed"}),
                   "unknown flag '--prority'");
}

TEST(CtlResolveErrorTest, MissingProfileFlag) {
  ExpectUsageError(Ctl({"resolve", "--offline"}), "--profile FILE is required");
}

TEST(CtlResolveErrorTest, WithoutOfflineTheConfiguredServerIsAskedAndABadConfigIsNamed) {
  TempFile config("config.yaml", "server: 127.0.0.1:1\nsevrer: typo\n");
  ProcessResult result = RunProcess(
      {WEIGHTPATHCTL_PATH, "resolve", "--profile", ExampleProfile("amd-zen4")},
      {{"WEIGHTPATH_CONFIG", config.path()}, {"WEIGHTPATH_SERVER", ""}});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_THAT(result.err, AllOf(HasSubstr("WEIGHTPATH_CONFIG: " + config.path() + ":2:1: sevrer"),
                                HasSubstr("unknown key 'sevrer'")));
}

TEST(CtlResolveErrorTest, UnknownOutputFormat) {
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", ExampleProfile("amd-zen4"), "-o",
                        "xml"}),
                   "-o/--output 'xml' is not one of: json, table, yaml");
}

TEST(CtlResolveTest, YamlIsTheJsonDocumentInYaml) {
  const ProcessResult yaml =
      Ctl({"resolve", "--offline", "--profile", ExampleProfile("amd-zen4"), "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, HasSubstr("hardware_class: \"x86_cpu\""));
  EXPECT_THAT(yaml.out, HasSubstr("weight_path:"));
}

TEST(CtlResolveErrorTest, InvalidPolicyFileNamesTheLine) {
  TempFile path_file("bad_policy.yaml", "schema: 1\npaths: []\nrules: []\nextra: 1\n");
  const std::string& path = path_file.path();
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", ExampleProfile("amd-zen4"),
                        "--policy", path}),
                   path + ":4:1: extra: unknown key 'extra'");
}

TEST(CtlResolveErrorTest, ARepeatedFlagIsRefusedNamingIt) {
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile", ExampleProfile("amd-zen4"),
                        "--priority", "speed", "--priority", "fidelity"}),
                   "flag --priority given twice");
}

TEST(CtlResolveErrorTest, FlagWithoutItsValue) {
  ExpectUsageError(Ctl({"resolve", "--offline", "--profile"}), "flag --profile needs a value");
}

TEST(CtlCommandTableTest, HelpAndUnknownCommands) {
  ProcessResult help = Ctl({"help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("resolve"));
  ProcessResult resolve_help = Ctl({"resolve", "--help"});
  EXPECT_EQ(resolve_help.exit_code, 0);
  EXPECT_THAT(resolve_help.out, AllOf(HasSubstr("--profile"), HasSubstr("--offline")));
  ExpectUsageError(Ctl({"deploy"}), "unknown command 'deploy'");
  ProcessResult nothing = Ctl({});
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_THAT(nothing.err, HasSubstr("usage: weightpathctl"));
}

}  // namespace
}  // namespace weightpath::ctl
