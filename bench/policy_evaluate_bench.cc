// Cost of one policy decision per hardware class, on the bundled example
// profiles (real CPU flag lists: the x86 ones carry ~150 flags, which is
// where a naive string-set lookup would spend its time).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "benchmark/benchmark.h"
#include "policy/policy.h"
#include "policy/profile_json.h"

namespace weightpath::policy {
namespace {

v1::HardwareProfile LoadExample(const std::string& name) {
  const std::string path = std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/" + name + ".json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<v1::HardwareProfile> profile = ParseProfileJson(text.str(), path);
  if (!profile.ok()) {
    std::cerr << profile.status() << "\n";
    std::abort();
  }
  return *std::move(profile);
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
