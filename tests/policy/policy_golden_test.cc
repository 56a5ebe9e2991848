// Every branch of the seed's selector, through the bundled default policy,
// with every field of the resulting WeightPathSpec and engine kwargs spelled
// out here rather than read back from the YAML.
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::policy {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;

struct ExpectedPath {
  std::string path_id;
  std::string name;
  std::string quantization;
  std::optional<uint32_t> group_size;
  std::optional<double> bits_per_weight;
  bool runs_in_vllm;
  bool verified;
  std::string build_with;
  // Figures (or phrases) the rationale must carry.
  std::vector<std::string> rationale_has;
  // One entry per note: figures that note must carry.
  std::vector<std::vector<std::string>> notes_have;
  size_t expected_figure_sets;
  // The engine kwargs' "quantization", or nullopt for {}.
  std::optional<std::string> engine_quantization;
};

const ExpectedPath kNpuExport = {
    "export-qnn-w8a16", "export-qnn-w8a16", "", std::nullopt, 8.0, false, true,
    "vllm_omni/edge/spark_export.py", {"36.9 dB", "5.1 dB", "converter"},
    {{"-1.6 dB"}, {"0.917 ms", "0.912 ms"}}, 0, std::nullopt};
const ExpectedPath kBf16Cuda = {"bf16-cuda", "bf16", "", std::nullopt, 16.0, true, true, "",
                                {"model dtype", "marlin"}, {}, 0, std::nullopt};
const ExpectedPath kFp16Cuda = {"fp16-cuda", "fp16", "", std::nullopt, 16.0, true, true, "",
                                {"model dtype", "marlin"}, {}, 0, std::nullopt};
const ExpectedPath kBf16Jetson = {"bf16-jetson", "bf16", "", std::nullopt, 16.0, true, false, "",
                                  {"model dtype", "marlin"}, {}, 0, std::nullopt};
const ExpectedPath kFp16Jetson = {"fp16-jetson", "fp16", "", std::nullopt, 16.0, true, false, "",
                                  {"model dtype", "marlin"}, {}, 0, std::nullopt};
const ExpectedPath kTinygemmArm = {
    "w4a16-tinygemm-arm64", "w4a16-tinygemm", "cpu_int4", 128u, 4.25, true, false,
    "analysis/experiments/spark_edge/quantize_int4.py", {"int4_scaled_mm_cpu", "KleidiAI"},
    {{"x86 only"}}, 0, "cpu_int4"};
const ExpectedPath kW4a8Amx = {
    "w4a8-amx", "w4a8-amx", "gptq", 128u, 4.25, true, true,
    "analysis/experiments/spark_edge/quantize_gptq_int4.py",
    {"84.5 tok/s", "78.7", "41.0", "3.0x", "86.6 tok/s", "80.0", "90.0", "5.91 ms", "11.55 ms",
     "6.85 ms", "12.51 ms", "11.11 ms"},
    {{"1 of 12", "2 of 12", "4 of 12"}, {"int8", "Q4_K_M"}}, 3, "gptq"};
const ExpectedPath kTinygemmX86 = {
    "w4a16-tinygemm-x86", "w4a16-tinygemm", "cpu_int4", 128u, 4.25, true, true,
    "analysis/experiments/spark_edge/quantize_int4.py",
    {"78.7 tok/s", "80.0 tok/s", "6.85 ms", "12.51 ms", "86.6", "2 of 12", "1 of 12"}, {}, 3,
    "cpu_int4"};

struct GoldenCase {
  std::string name;
  std::string arch;
  std::string accelerator;
  std::vector<std::string> flags;
  bool supports_bf16;
  v1::Priority priority;
  std::string hardware_class;
  v1::Priority effective_priority;
  const ExpectedPath* path;
};

std::vector<GoldenCase> GoldenCases() {
  const auto S = v1::PRIORITY_SPEED;
  const auto F = v1::PRIORITY_FIDELITY;
  const auto U = v1::PRIORITY_UNSPECIFIED;
  return {
      // x86 CPU: AMX flag variants x priority.
      {"x86_amx_tile_and_bf16_speed", "x86_64", "none", {"avx512f", "amx_tile", "amx_bf16"}, true, S, "x86_cpu", S, &kW4a8Amx},
      {"x86_amx_tile_only_speed", "x86_64", "none", {"amx_tile"}, false, S, "x86_cpu", S, &kW4a8Amx},
      {"x86_amx_bf16_without_tile_speed", "x86_64", "", {"avx512_bf16", "amx_bf16"}, true, S, "x86_cpu", S, &kW4a8Amx},
      {"x86_amx_unspecified_priority_means_speed", "x86_64", "none", {"amx_tile", "amx_int8"}, true, U, "x86_cpu", S, &kW4a8Amx},
      {"x86_amx_fidelity", "x86_64", "none", {"amx_tile", "amx_bf16"}, true, F, "x86_cpu", F, &kTinygemmX86},
      {"x86_amx_bf16_without_tile_fidelity", "x86_64", "none", {"amx_bf16"}, true, F, "x86_cpu", F, &kTinygemmX86},
      {"x86_amx_int8_alone_is_not_amx", "x86_64", "none", {"amx_int8"}, false, S, "x86_cpu", S, &kTinygemmX86},
      {"x86_avx512_no_amx_speed", "x86_64", "none", {"avx512f", "avx512_bf16"}, true, S, "x86_cpu", S, &kTinygemmX86},
      {"x86_no_amx_fidelity", "x86_64", "none", {"avx2"}, false, F, "x86_cpu", F, &kTinygemmX86},
      {"x86_no_flags_unspecified", "x86_64", "none", {}, false, U, "x86_cpu", S, &kTinygemmX86},
      // arm64 CPU, including AMX-named flags, which mean nothing off x86.
      {"arm64_speed", "aarch64", "none", {"asimd", "sve", "bf16"}, true, S, "arm64_cpu", S, &kTinygemmArm},
      {"arm64_fidelity", "aarch64", "none", {"asimd"}, false, F, "arm64_cpu", F, &kTinygemmArm},
      {"arm64_with_amx_named_flags_speed", "aarch64", "none", {"amx_tile", "amx_bf16"}, true, S, "arm64_cpu", S, &kTinygemmArm},
      {"arm64_unspecified", "aarch64", "", {}, false, U, "arm64_cpu", S, &kTinygemmArm},
      // Discrete CUDA with and without bf16.
      {"cuda_discrete_bf16_speed", "x86_64", "cuda_discrete", {"amx_tile"}, true, S, "cuda_discrete", S, &kBf16Cuda},
      {"cuda_discrete_bf16_fidelity", "x86_64", "cuda_discrete", {}, true, F, "cuda_discrete", F, &kBf16Cuda},
      {"cuda_discrete_fp16_speed", "x86_64", "cuda_discrete", {}, false, S, "cuda_discrete", S, &kFp16Cuda},
      {"cuda_discrete_fp16_unspecified", "aarch64", "cuda_discrete", {}, false, U, "cuda_discrete", S, &kFp16Cuda},
      // Jetson (unified memory) with and without bf16.
      {"jetson_bf16", "aarch64", "cuda_unified", {"asimd"}, true, S, "jetson", S, &kBf16Jetson},
      {"jetson_bf16_fidelity", "aarch64", "cuda_unified", {}, true, F, "jetson", F, &kBf16Jetson},
      {"jetson_fp16", "aarch64", "cuda_unified", {}, false, S, "jetson", S, &kFp16Jetson},
      // Phone NPUs, any vendor, any priority, even with AMX-named flags.
      {"npu_qualcomm_speed", "aarch64", "npu:qualcomm", {}, false, S, "npu_phone", S, &kNpuExport},
      {"npu_mediatek_fidelity", "aarch64", "npu:mediatek", {"bf16"}, true, F, "npu_phone", F, &kNpuExport},
      {"npu_on_x86_with_amx_unspecified", "x86_64", "npu:intel", {"amx_tile"}, true, U, "npu_phone", S, &kNpuExport},
      {"npu_on_unknown_arch", "riscv64", "npu:sophgo", {}, false, S, "npu_phone", S, &kNpuExport},
  };
}

// Names the case in test output instead of dumping its bytes.
void PrintTo(const GoldenCase& golden, std::ostream* out) { *out << golden.name; }

class PolicyGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(PolicyGoldenTest, DefaultPolicyReproducesSeedBranch) {
  const GoldenCase& golden = GetParam();
  v1::HardwareProfile profile;
  profile.set_arch(golden.arch);
  profile.set_accelerator(golden.accelerator);
  for (const std::string& flag : golden.flags) profile.add_cpu_flags(flag);
  profile.set_supports_bf16(golden.supports_bf16);

  std::shared_ptr<const Policy> policy = DefaultPolicy();
  absl::StatusOr<Decision> decision = Evaluate(*policy, profile, golden.priority, Labels());
  ASSERT_THAT(decision, IsOk());
  EXPECT_EQ(HardwareClassName(decision->hardware_class), golden.hardware_class);
  EXPECT_EQ(decision->effective_priority, golden.effective_priority);
  ASSERT_NE(decision->path, nullptr);
  ASSERT_NE(decision->rule, nullptr);
  EXPECT_EQ(decision->rule->path_id, golden.path->path_id);

  v1::WeightPathSpec spec;
  FillWeightPathSpec(*decision->path, &spec);
  const ExpectedPath& want = *golden.path;
  EXPECT_EQ(spec.path_id(), want.path_id);
  EXPECT_EQ(spec.name(), want.name);
  EXPECT_EQ(spec.quantization(), want.quantization);
  EXPECT_EQ(spec.has_group_size(), want.group_size.has_value());
  if (want.group_size) {
    EXPECT_EQ(spec.group_size(), *want.group_size);
  }
  ASSERT_EQ(spec.has_bits_per_weight(), want.bits_per_weight.has_value());
  if (want.bits_per_weight) {
    EXPECT_DOUBLE_EQ(spec.bits_per_weight(), *want.bits_per_weight);
  }
  EXPECT_FALSE(spec.fused_cpu_norms());
  EXPECT_EQ(spec.runs_in_vllm(), want.runs_in_vllm);
  EXPECT_EQ(spec.verified(), want.verified);
  EXPECT_EQ(spec.build_with(), want.build_with);
  for (const std::string& figure : want.rationale_has) {
    EXPECT_THAT(spec.rationale(), HasSubstr(figure));
  }
  ASSERT_EQ(static_cast<size_t>(spec.notes_size()), want.notes_have.size());
  for (size_t i = 0; i < want.notes_have.size(); ++i) {
    for (const std::string& figure : want.notes_have[i]) {
      EXPECT_THAT(spec.notes(static_cast<int>(i)), HasSubstr(figure)) << "note " << i;
    }
  }
  EXPECT_EQ(static_cast<size_t>(spec.expected_size()), want.expected_figure_sets);
  EXPECT_FALSE(spec.has_verification());

  google::protobuf::Struct kwargs;
  FillEngineKwargs(*decision->path, &kwargs);
  if (want.engine_quantization) {
    ASSERT_EQ(kwargs.fields_size(), 1);
    EXPECT_EQ(kwargs.fields().at("quantization").string_value(), *want.engine_quantization);
  } else {
    EXPECT_EQ(kwargs.fields_size(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(SeedBranches, PolicyGoldenTest, ::testing::ValuesIn(GoldenCases()),
                         [](const auto& info) { return info.param.name; });

// Both reference measurements of each x86 4-bit path are kept, each with the
// conditions it was taken under.
TEST(PolicyGoldenFiguresTest, X86PathsCarryBothDecodeMeasurements) {
  std::shared_ptr<const Policy> policy = DefaultPolicy();
  struct Want {
    std::string path_id;
    double profiled_decode, profiled_gemm, profiled_step, quoted_decode;
    uint32_t exact_matches;
  };
  for (const Want& want : {Want{"w4a8-amx", 86.6, 5.91, 11.55, 84.5, 1},
                           Want{"w4a16-tinygemm-x86", 80.0, 6.85, 12.51, 78.7, 2}}) {
    const PathDefinition* path = policy->FindPath(want.path_id);
    ASSERT_NE(path, nullptr) << want.path_id;
    ASSERT_EQ(path->expected.size(), 3u);
    for (const ExpectedFigures& figures : path->expected) {
      EXPECT_EQ(figures.cpu_model, "Intel Xeon Platinum 8480C");
      EXPECT_EQ(figures.threads, 24u);
      EXPECT_EQ(figures.model, "Spark-X2.5-1.7B");
      EXPECT_FALSE(figures.condition.empty());
    }
    const ExpectedFigures& profiled = path->expected[0];
    EXPECT_THAT(profiled.condition, HasSubstr("back to back"));
    EXPECT_EQ(profiled.decode_tok_s, want.profiled_decode);
    EXPECT_EQ(profiled.gemm_ms_per_step, want.profiled_gemm);
    EXPECT_EQ(profiled.step_ms, want.profiled_step);
    const ExpectedFigures& quoted = path->expected[1];
    EXPECT_THAT(quoted.condition, HasSubstr("rationale"));
    EXPECT_EQ(quoted.decode_tok_s, want.quoted_decode);
    const ExpectedFigures& fidelity = path->expected[2];
    EXPECT_EQ(fidelity.fidelity_exact_matches, want.exact_matches);
    EXPECT_EQ(fidelity.fidelity_prompts, 12u);
  }
  EXPECT_EQ(policy->FindPath("w4a8-amx")->expected[1].prefill_vs_llama_cpp, 3.0);
}

TEST(PolicyGoldenFiguresTest, DefaultPolicyReachesEveryPathNameAndEveryRule) {
  std::shared_ptr<const Policy> policy = DefaultPolicy();
  EXPECT_THAT(policy->ReachablePathNames(),
              ::testing::ElementsAre("export-qnn-w8a16", "bf16", "fp16", "w4a16-tinygemm",
                                     "w4a8-amx"));
  EXPECT_THAT(policy->UnreachableRuleNames(), ::testing::IsEmpty());
  for (const PathDefinition& path : policy->paths()) EXPECT_FALSE(path.fused_cpu_norms) << path.id;
}

TEST(PolicyGoldenFiguresTest, DefaultPolicyDocumentsTheCaveats) {
  const std::string_view yaml = DefaultPolicyYaml();
  for (std::string_view fact :
       {"priority=fidelity", "not recognise", "cpu_gemm_wna16", "NOT a comparison at equal bit",
        "4.25", "36.9 dB", "2.97 ms", "0.94 ms", "0.48 ms", "3.6-4.5x", "4/12"}) {
    EXPECT_NE(yaml.find(fact), std::string_view::npos) << fact;
  }
}

}  // namespace
}  // namespace weightpath::policy
