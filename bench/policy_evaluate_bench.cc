// Cost of one policy decision per hardware class, on the bundled example
// profiles (real CPU flag lists: the x86 ones carry ~150 flags, which is
// where a naive string-set lookup would spend its time).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "benchmark/benchmark.h"
#include "policy/engine_args.h"
#include "policy/gpu_facts.h"
#include "policy/model_facts.h"
#include "policy/policy.h"
#include "policy/profile_json.h"

namespace weightpath::policy {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

v1::HardwareProfile LoadProfile(const std::string& path) {
  absl::StatusOr<v1::HardwareProfile> profile = ParseProfileJson(ReadText(path), path);
  if (!profile.ok()) {
    std::cerr << profile.status() << "\n";
    std::abort();
  }
  return *std::move(profile);
}

v1::HardwareProfile LoadExample(const std::string& name) {
  return LoadProfile(std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/" + name + ".json");
}

// A GPU machine the probe has met (tests/data/gpu-profiles), or an example
// profile when the name has no such file.
v1::HardwareProfile LoadGpuMachine(const std::string& name) {
  const std::string path = std::string(WEIGHTPATH_GPU_PROFILES_DIR) + "/" + name + ".json";
  if (std::ifstream(path).good()) return LoadProfile(path);
  return LoadExample(name);
}

std::shared_ptr<const Policy> GpuFleetPolicy() {
  static const std::shared_ptr<const Policy> policy = [] {
    const std::string path = WEIGHTPATH_GPU_FLEET_POLICY;
    absl::StatusOr<std::shared_ptr<const Policy>> loaded = LoadPolicy(ReadText(path), path);
    if (!loaded.ok()) {
      std::cerr << loaded.status() << "\n";
      std::abort();
    }
    return *loaded;
  }();
  return policy;
}

ModelFacts Llama8B() {
  ModelFacts facts;
  facts.parameters = 8030261248;
  facts.attention_heads = 32;
  facts.kv_heads = 8;
  facts.layers = 32;
  facts.head_dim = 128;
  facts.max_context = 131072;
  return facts;
}

void EvaluateExample(benchmark::State& state, const std::string& example,
                     v1::Priority priority) {
  const v1::HardwareProfile profile = LoadExample(example);
  std::shared_ptr<const Policy> policy = DefaultPolicy();
  const Labels labels;
  absl::StatusOr<Decision> first = Evaluate(*policy, profile, priority, labels);
  if (!first.ok()) {
    state.SkipWithError(std::string(first.status().message()).c_str());
    return;
  }
  state.SetLabel(std::string(HardwareClassName(first->hardware_class)) + " -> " +
                 first->path->id + " (" + std::to_string(profile.cpu_flags_size()) + " flags)");
  for (auto _ : state) {
    absl::StatusOr<Decision> decision = Evaluate(*policy, profile, priority, labels);
    benchmark::DoNotOptimize(decision);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(EvaluateExample, x86_amx_speed, "intel-sapphire-rapids", v1::PRIORITY_SPEED);
BENCHMARK_CAPTURE(EvaluateExample, x86_amx_fidelity, "intel-sapphire-rapids",
                  v1::PRIORITY_FIDELITY);
BENCHMARK_CAPTURE(EvaluateExample, x86_no_amx, "amd-zen4", v1::PRIORITY_SPEED);
BENCHMARK_CAPTURE(EvaluateExample, arm64_cpu, "aws-graviton3", v1::PRIORITY_SPEED);
BENCHMARK_CAPTURE(EvaluateExample, jetson, "jetson-agx-orin", v1::PRIORITY_SPEED);
BENCHMARK_CAPTURE(EvaluateExample, cuda_discrete, "rtx-4090", v1::PRIORITY_SPEED);
BENCHMARK_CAPTURE(EvaluateExample, npu_phone, "snapdragon-8gen2", v1::PRIORITY_SPEED);

// The same GPU machines under the bundled default policy (A) and the GPU
// fleet policy, whose GPU rules test capability and L4T ranges (B), in one
// run: the rule choice alone, what every resolve pays.
void EvaluateGpuMachine(benchmark::State& state, const std::string& machine, bool gpu_fleet,
                        v1::Priority priority) {
  const v1::HardwareProfile profile = LoadGpuMachine(machine);
  std::shared_ptr<const Policy> policy = gpu_fleet ? GpuFleetPolicy() : DefaultPolicy();
  const Labels labels;
  absl::StatusOr<Decision> first = Evaluate(*policy, profile, priority, labels);
  if (!first.ok()) {
    state.SkipWithError(std::string(first.status().message()).c_str());
    return;
  }
  state.SetLabel(std::string(gpu_fleet ? "gpu-fleet" : "default") + ": " + first->path->id +
                 " (" + std::to_string(profile.gpus_size()) + " GPUs)");
  for (auto _ : state) {
    absl::StatusOr<Decision> decision = Evaluate(*policy, profile, priority, labels);
    benchmark::DoNotOptimize(decision);
  }
  state.SetItemsProcessed(state.iterations());
}

#define GPU_AB(name, machine)                                                          \
  BENCHMARK_CAPTURE(EvaluateGpuMachine, name##_default, machine, false, v1::PRIORITY_SPEED); \
  BENCHMARK_CAPTURE(EvaluateGpuMachine, name##_gpu_fleet, machine, true, v1::PRIORITY_SPEED)
GPU_AB(h200, "h200");
GPU_AB(dgx_8xh100, "dgx-8xh100");
GPU_AB(a100_mig, "a100-mig-2x3g40gb");
GPU_AB(jetson_orin_r36, "jetson-orin-r36");
GPU_AB(rtx4090_busy, "rtx4090-busy");
GPU_AB(tesla_t4, "tesla-t4");
// The CPU classes under the GPU fleet policy: its GPU rules come first but
// fail on the hardware class before any GPU fact is read.
BENCHMARK_CAPTURE(EvaluateGpuMachine, x86_amx_speed_gpu_fleet, "intel-sapphire-rapids", true,
                  v1::PRIORITY_SPEED);

// The engine arguments of the chosen path (the facts, then five
// expressions), on top of the rule choice; without the protobuf Struct the
// response carries.
void DeriveGpuEngineArgs(benchmark::State& state, const std::string& machine) {
  const v1::HardwareProfile profile = LoadGpuMachine(machine);
  std::shared_ptr<const Policy> policy = GpuFleetPolicy();
  absl::StatusOr<Decision> decision =
      Evaluate(*policy, profile, v1::PRIORITY_SPEED, Labels());
  if (!decision.ok()) {
    state.SkipWithError(std::string(decision.status().message()).c_str());
    return;
  }
  const ModelFacts model = Llama8B();
  state.SetLabel(decision->path->id + " (" +
                 std::to_string(decision->path->engine_args.size()) + " arguments)");
  for (auto _ : state) {
    const DerivedEngineArgs derived =
        DeriveEngineArgs(*decision->path, InputsFor(profile, GpuFactsOf(profile), model));
    benchmark::DoNotOptimize(derived);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(DeriveGpuEngineArgs, h200, "h200");
BENCHMARK_CAPTURE(DeriveGpuEngineArgs, dgx_8xh100, "dgx-8xh100");
BENCHMARK_CAPTURE(DeriveGpuEngineArgs, a100_mig, "a100-mig-2x3g40gb");

void LoadGpuFleetPolicy(benchmark::State& state) {
  const std::string text = ReadText(WEIGHTPATH_GPU_FLEET_POLICY);
  for (auto _ : state) {
    absl::StatusOr<std::shared_ptr<const Policy>> policy = LoadPolicy(text, "gpu-fleet.yaml");
    benchmark::DoNotOptimize(policy);
  }
}
BENCHMARK(LoadGpuFleetPolicy)->Unit(benchmark::kMicrosecond);

// Loading includes parsing, validation and the totality walk; it happens once
// per policy change, not per decision.
void LoadDefaultPolicy(benchmark::State& state) {
  const std::string_view yaml = DefaultPolicyYaml();
  for (auto _ : state) {
    absl::StatusOr<std::shared_ptr<const Policy>> policy = LoadPolicy(yaml, "default_policy.yaml");
    benchmark::DoNotOptimize(policy);
  }
}
BENCHMARK(LoadDefaultPolicy)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace weightpath::policy

BENCHMARK_MAIN();
