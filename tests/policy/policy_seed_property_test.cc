// The data-driven default policy against a direct transcription of the seed's
// select_weight_path, over thousands of generated profiles.
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::policy {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::StatusIs;

// The seed's WeightPath, minus the prose (ours is reworded on purpose).
struct SeedWeightPath {
  std::string name;
  std::string quantization;  // None -> ""
  std::optional<uint32_t> group_size;
  std::optional<double> bits_per_weight;
  bool fused_cpu_norms;
  bool runs_in_vllm;
  bool verified;
  std::string build_with;
  size_t note_count;
};

// hardware_probe.hardware_class as the issue states it: accelerator first,
// then aarch64 -> arm64, and everything else -> x86.
std::string SeedHardwareClass(const v1::HardwareProfile& profile) {
  if (profile.accelerator().rfind("npu", 0) == 0) return "npu_phone";
  if (profile.accelerator() == "cuda_unified") return "jetson";
  if (profile.accelerator() == "cuda_discrete") return "cuda_discrete";
  if (profile.arch() == "aarch64") return "arm64_cpu";
  return "x86_cpu";
}

bool SeedHasAmx(const v1::HardwareProfile& profile) {
  if (profile.arch() != "x86_64") return false;
  for (const std::string& flag : profile.cpu_flags()) {
    if (flag == "amx_tile" || flag == "amx_bf16") return true;
  }
  return false;
}

SeedWeightPath SeedSelect(const v1::HardwareProfile& profile, const std::string& priority) {
  const std::string cls = SeedHardwareClass(profile);
  if (cls == "npu_phone") {
    return {"export-qnn-w8a16", "", std::nullopt, 8.0, false, false, true,
            "vllm_omni/edge/spark_export.py", 2};
  }
  if (cls == "cuda_discrete" || cls == "jetson") {
    return {profile.supports_bf16() ? "bf16" : "fp16", "", std::nullopt, 16.0, false, true,
            cls == "cuda_discrete", "", 0};
  }
  if (cls == "arm64_cpu") {
    return {"w4a16-tinygemm", "cpu_int4", 128, 4.25, false, true, false,
            "analysis/experiments/spark_edge/quantize_int4.py", 1};
  }
  if (SeedHasAmx(profile) && priority == "speed") {
    return {"w4a8-amx", "gptq", 128, 4.25, false, true, true,
            "analysis/experiments/spark_edge/quantize_gptq_int4.py", 2};
  }
  return {"w4a16-tinygemm", "cpu_int4", 128, 4.25, false, true, true,
          "analysis/experiments/spark_edge/quantize_int4.py", 0};
}

// as_engine_kwargs: {} unless it runs in vLLM and quantizes.
std::optional<std::string> SeedEngineQuantization(const SeedWeightPath& path) {
  if (!path.runs_in_vllm || path.quantization.empty()) return std::nullopt;
  return path.quantization;
}

template <typename T>
const T& Pick(std::mt19937& rng, const std::vector<T>& choices) {
  return choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
}

TEST(PolicySeedPropertyTest, DefaultPolicyAgreesWithSeedSelectorOnEveryField) {
  const std::vector<std::string> archs = {"x86_64", "x86_64", "aarch64", "aarch64",
                                          "riscv64", "", "armv7l", "i686"};
  const std::vector<std::string> accelerators = {
      "", "none", "none", "cuda_discrete", "cuda_unified", "npu:qualcomm", "npu:mediatek",
      "npu", "rocm"};
  const std::vector<std::string> flag_pool = {"amx_tile", "amx_bf16", "amx_int8", "avx512f",
                                              "avx512_bf16", "avx2", "asimd", "sve", "bf16",
                                              "AMX_TILE", "amx", "fp16"};
  const std::vector<v1::Priority> priorities = {v1::PRIORITY_UNSPECIFIED, v1::PRIORITY_SPEED,
                                                v1::PRIORITY_FIDELITY};
  const std::vector<std::string> workloads = {"", "agentic", "chat"};

  std::shared_ptr<const Policy> policy = DefaultPolicy();
  std::mt19937 rng(20261130);
  int compared = 0;
  int refused = 0;
  for (int i = 0; i < 5000; ++i) {
    v1::HardwareProfile profile;
    profile.set_arch(Pick(rng, archs));
    profile.set_accelerator(Pick(rng, accelerators));
    for (const std::string& flag : flag_pool) {
      if (rng() % 3 == 0) profile.add_cpu_flags(flag);
    }
    profile.set_supports_bf16(rng() % 2 == 0);
    const v1::Priority priority = Pick(rng, priorities);
    Labels labels;
    if (const std::string& workload = Pick(rng, workloads); !workload.empty()) {
      labels["workload"] = workload;
    }
    SCOPED_TRACE(profile.ShortDebugString() + " priority=" + v1::Priority_Name(priority));

    absl::StatusOr<Decision> decision = Evaluate(*policy, profile, priority, labels);
    const bool seed_guessed_x86 = SeedHardwareClass(profile) == "x86_cpu" &&
                                  profile.arch() != "x86_64";
    if (seed_guessed_x86) {
      // Deliberate divergence: the seed handed unknown CPUs an x86 build.
      EXPECT_THAT(decision, StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("profile.arch")));
      ++refused;
      continue;
    }
    ASSERT_TRUE(decision.ok()) << decision.status();
    const std::string seed_priority = priority == v1::PRIORITY_FIDELITY ? "fidelity" : "speed";
    const SeedWeightPath seed = SeedSelect(profile, seed_priority);
    const PathDefinition& path = *decision->path;
    EXPECT_EQ(HardwareClassName(decision->hardware_class), SeedHardwareClass(profile));
    EXPECT_EQ(path.name, seed.name);
    EXPECT_EQ(path.quantization, seed.quantization);
    EXPECT_EQ(path.group_size, seed.group_size);
    EXPECT_EQ(path.bits_per_weight, seed.bits_per_weight);
    EXPECT_EQ(path.fused_cpu_norms, seed.fused_cpu_norms);
    EXPECT_EQ(path.runs_in_vllm, seed.runs_in_vllm);
    EXPECT_EQ(path.verified, seed.verified);
    EXPECT_EQ(path.build_with, seed.build_with);
    EXPECT_EQ(path.notes.size(), seed.note_count);
    EXPECT_FALSE(path.rationale.empty());

    google::protobuf::Struct kwargs;
    FillEngineKwargs(path, &kwargs);
    const std::optional<std::string> seed_quantization = SeedEngineQuantization(seed);
    if (seed_quantization) {
      ASSERT_EQ(kwargs.fields_size(), 1);
      EXPECT_EQ(kwargs.fields().at("quantization").string_value(), *seed_quantization);
    } else {
      EXPECT_EQ(kwargs.fields_size(), 0);
    }
    ++compared;
    if (::testing::Test::HasFailure()) break;  // one clear counterexample is enough
  }
  // The generator must exercise both sides in quantity.
  EXPECT_GT(compared, 3000);
  EXPECT_GT(refused, 200);
}

}  // namespace
}  // namespace weightpath::policy
