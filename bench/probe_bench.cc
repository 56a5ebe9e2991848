// Time of one ProbeHardware call: on this machine ("/", with the live seams:
// uname, dlopen of the NVIDIA libraries, AMX request, affinity) and on each
// tree under tests/data/hardware (filesystem only). Every iteration builds a
// fresh profile, as the agent does once per boot.
#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "agent/probe/filesystem.h"
#include "agent/probe/probe.h"
#include "benchmark/benchmark.h"

namespace weightpath::probe {
namespace {

void ProbeOnce(benchmark::State& state, const ProbeEnvironment& environment) {
  for (auto _ : state) {
    auto profile = ProbeHardware(environment);
    if (!profile.ok()) {
      state.SkipWithError(std::string(profile.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(profile);
  }
}

void BM_ProbeLiveMachine(benchmark::State& state) {
  const auto filesystem = MakeRootedFilesystem("/");
  ProbeEnvironment environment = LiveProbeEnvironment(*filesystem);
  environment.environment_variables.clear();  // measure the probe, not a file load
  ProbeOnce(state, environment);
}
BENCHMARK(BM_ProbeLiveMachine)->Unit(benchmark::kMillisecond);

std::vector<std::string> FixtureTrees() {
  std::vector<std::string> names;
  if (DIR* directory = opendir(WEIGHTPATH_HARDWARE_DATA)) {
    while (const dirent* entry = readdir(directory)) {
      const std::string name = entry->d_name;
      if (name != "." && name != ".." && entry->d_type == DT_DIR) names.push_back(name);
    }
    closedir(directory);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace
}  // namespace weightpath::probe

int main(int argc, char** argv) {
  using namespace weightpath::probe;
  for (const std::string& device : FixtureTrees()) {
    benchmark::RegisterBenchmark(("BM_ProbeFixture/" + device).c_str(),
                                 [device](benchmark::State& state) {
                                   const auto filesystem = MakeRootedFilesystem(
                                       std::string(WEIGHTPATH_HARDWARE_DATA) + "/" + device);
                                   ProbeOnce(state, TreeProbeEnvironment(*filesystem));
                                 })
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
