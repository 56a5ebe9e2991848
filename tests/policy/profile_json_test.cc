// Seed-prober JSON in, HardwareProfile out; priority and label text.
#include "policy/profile_json.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::policy {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

// What the seed's prober writes for a CPU-only host: every field present,
// GPU fields null, plus keys this build does not know.
constexpr char kSeedCpuProfile[] = R"({
  "arch": "x86_64",
  "cpu_model": "Intel(R) Xeon(R) Platinum 8480C",
  "cpu_flags": ["fpu", "avx512f", "amx_bf16", "amx_tile", "amx_int8"],
  "n_logical": 224,
  "n_physical": 112,
  "clusters": [{"max_khz": 3800000, "cpus": [0, 1, 2, 3]}],
  "numa_nodes": 2,
  "ram_total_bytes": 2163272855552,
  "ram_available_bytes": 1999999991808,
  "accelerator": "none",
  "gpu_name": null,
  "gpu_mem_bytes": null,
  "gpu_sm_count": null,
  "gpu_capability": null,
  "supports_bf16": true,
  "supports_fp16": true,
  "thermal_zones": 0,
  "host_os": "linux",
  "accelerators": [{"kind": "npu", "vendor": "intel", "name": null, "usable": false,
                    "source": "/dev/accel", "reason": "no driver", "route": null,
                    "driver": null, "future_key": 1}],
  "source": "probe",
  "probe_version": 3,
  "kv_budget": {"nested": [1, 2]}
})";

TEST(PolicyProfileJsonTest, ParsesSeedProberOutput) {
  absl::StatusOr<v1::HardwareProfile> profile = ParseProfileJson(kSeedCpuProfile, "host.json");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->arch(), "x86_64");
  EXPECT_EQ(profile->cpu_model(), "Intel(R) Xeon(R) Platinum 8480C");
  EXPECT_THAT(profile->cpu_flags(),
              ElementsAre("fpu", "avx512f", "amx_bf16", "amx_tile", "amx_int8"));
  EXPECT_EQ(profile->n_logical(), 224u);
  EXPECT_EQ(profile->n_physical(), 112u);
  ASSERT_EQ(profile->clusters_size(), 1);
  EXPECT_EQ(profile->clusters(0).max_khz(), 3800000u);
  EXPECT_THAT(profile->clusters(0).cpus(), ElementsAre(0u, 1u, 2u, 3u));
  EXPECT_EQ(profile->numa_nodes(), 2u);
  EXPECT_EQ(profile->ram_total_bytes(), 2163272855552u);
  EXPECT_EQ(profile->ram_available_bytes(), 1999999991808u);
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_EQ(profile->gpu_name(), "");
  EXPECT_EQ(profile->gpu_mem_bytes(), 0u);
  EXPECT_EQ(profile->gpu_capability_size(), 0);
  EXPECT_TRUE(profile->supports_bf16());
  EXPECT_TRUE(profile->supports_fp16());
  EXPECT_EQ(profile->host_os(), "linux");
  ASSERT_EQ(profile->accelerators_size(), 1);
  EXPECT_EQ(profile->accelerators(0).kind(), "npu");
  EXPECT_EQ(profile->accelerators(0).vendor(), "intel");
  EXPECT_FALSE(profile->accelerators(0).usable());
  EXPECT_EQ(profile->accelerators(0).source(), "/dev/accel");
  EXPECT_EQ(profile->accelerators(0).reason(), "no driver");
  EXPECT_EQ(profile->source(), "probe");
}

TEST(PolicyProfileJsonTest, GpuFields) {
  absl::StatusOr<v1::HardwareProfile> profile = ParseProfileJson(
      R"({"arch": "x86_64", "accelerator": "cuda_discrete", "gpu_name": "Tesla T4",
          "gpu_mem_bytes": 16106127360, "gpu_sm_count": 40, "gpu_capability": [7, 5],
          "supports_bf16": false, "supports_fp16": true})",
      "t4.json");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_name(), "Tesla T4");
  EXPECT_EQ(profile->gpu_mem_bytes(), 16106127360u);
  EXPECT_EQ(profile->gpu_sm_count(), 40u);
  EXPECT_THAT(profile->gpu_capability(), ElementsAre(7u, 5u));
  EXPECT_FALSE(profile->supports_bf16());
}

// Protobuf's JSON printer quotes 64-bit integers; its parser accepts either
// form for every integer, and so do we, so a printed profile reads back.
TEST(PolicyProfileJsonTest, QuotedIntegersAsProtobufPrintsThem) {
  absl::StatusOr<v1::HardwareProfile> profile = ParseProfileJson(
      R"({"ram_total_bytes": "68719476736", "n_logical": "8",
          "clusters": [{"max_khz": "3187200", "cpus": [7]}]})",
      "printed.json");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->ram_total_bytes(), 68719476736u);
  EXPECT_EQ(profile->n_logical(), 8u);
  EXPECT_EQ(profile->clusters(0).max_khz(), 3187200u);
  EXPECT_THAT(ParseProfileJson(R"({"n_logical": "-1"})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field 'n_logical'")));
  EXPECT_THAT(ParseProfileJson(R"({"n_logical": "4294967296"})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field 'n_logical'")));
}

TEST(PolicyProfileJsonTest, WrongTypesNameTheField) {
  EXPECT_THAT(ParseProfileJson(R"({"n_logical": "eight"})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("p.json: field 'n_logical': expected a non-negative integer")));
  EXPECT_THAT(ParseProfileJson(R"({"n_logical": true})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'n_logical': expected a non-negative integer, "
                                 "got a boolean")));
  EXPECT_THAT(ParseProfileJson(R"({"n_physical": -2})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'n_physical': expected a non-negative integer")));
  EXPECT_THAT(ParseProfileJson(R"({"numa_nodes": 1.5})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field 'numa_nodes'")));
  EXPECT_THAT(ParseProfileJson(R"({"cpu_flags": "avx2 amx_tile"})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'cpu_flags': expected a list, got a string")));
  EXPECT_THAT(ParseProfileJson(R"({"cpu_flags": ["avx2", 3]})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'cpu_flags[1]': expected a string, got a number")));
  EXPECT_THAT(ParseProfileJson(R"({"supports_bf16": "yes"})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'supports_bf16': expected true or false")));
  EXPECT_THAT(ParseProfileJson(R"({"arch": 64})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'arch': expected a string, got a number")));
  EXPECT_THAT(ParseProfileJson(R"({"clusters": [{"max_khz": "fast"}]})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'clusters[0].max_khz'")));
  EXPECT_THAT(ParseProfileJson(R"({"accelerators": [{"usable": "no"}]})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'accelerators[0].usable'")));
  EXPECT_THAT(ParseProfileJson(R"({"gpu_capability": [8, 99999999999]})", "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'gpu_capability[1]'")));
}

TEST(PolicyProfileJsonTest, MalformedDocuments) {
  EXPECT_THAT(ParseProfileJson(R"({"arch": "x86_64",)", "broken.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("broken.json: not valid JSON")));
  EXPECT_THAT(ParseProfileJson(R"(["x86_64"])", "list.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("list.json: expected a JSON object at the top level, got a list")));
  EXPECT_THAT(ParseProfileJson("  \n", "empty.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty.json: empty")));
}

TEST(PolicyProfileJsonTest, ParsePriority) {
  EXPECT_EQ(*ParsePriority("speed"), v1::PRIORITY_SPEED);
  EXPECT_EQ(*ParsePriority("Fidelity"), v1::PRIORITY_FIDELITY);
  EXPECT_EQ(*ParsePriority("SPEED"), v1::PRIORITY_SPEED);
  EXPECT_THAT(ParsePriority("fast"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("priority 'fast' is not one of: speed, fidelity")));
  EXPECT_THAT(ParsePriority(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PolicyProfileJsonTest, ParseLabels) {
  absl::StatusOr<Labels> labels = ParseLabels("workload=agentic, site = lab-3");
  ASSERT_THAT(labels, IsOk());
  EXPECT_EQ(labels->size(), 2u);
  EXPECT_EQ(labels->at("workload"), "agentic");
  EXPECT_EQ(labels->at("site"), "lab-3");
  EXPECT_THAT(ParseLabels(""), IsOk());
  EXPECT_THAT(ParseLabels("workload"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("item 'workload' is not key=value")));
  EXPECT_THAT(ParseLabels("=x"), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("has an empty key")));
  EXPECT_THAT(ParseLabels("a="), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("key 'a' has an empty value")));
  EXPECT_THAT(ParseLabels("a=1,a=2"), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("key 'a' is given twice")));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Every bundled example profile parses and lands in the class its name says.
TEST(PolicyProfileJsonTest, ExampleProfilesParseAndClassify) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"intel-sapphire-rapids.json", "x86_cpu"}, {"amd-zen4.json", "x86_cpu"},
      {"aws-graviton3.json", "arm64_cpu"},       {"raspberry-pi-5.json", "arm64_cpu"},
      {"jetson-agx-orin.json", "jetson"},        {"rtx-4090.json", "cuda_discrete"},
      {"tesla-t4.json", "cuda_discrete"},        {"snapdragon-8gen2.json", "npu_phone"},
  };
  for (const auto& [file, hardware_class] : expected) {
    const std::string path = std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/" + file;
    absl::StatusOr<v1::HardwareProfile> profile = ParseProfileJson(ReadFile(path), path);
    ASSERT_THAT(profile, IsOk()) << file;
    absl::StatusOr<HardwareClass> parsed_class = ClassifyHardware(*profile);
    ASSERT_THAT(parsed_class, IsOk()) << file;
    EXPECT_EQ(HardwareClassName(*parsed_class), hardware_class) << file;
  }
}

}  // namespace
}  // namespace weightpath::policy
