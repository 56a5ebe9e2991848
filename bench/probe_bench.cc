// Time of one ProbeHardware call: on this machine ("/", with the live seams:
// uname, dlopen of the NVIDIA libraries, AMX request, affinity), on each
// tree under tests/data/hardware (filesystem only), and on a GPU server
// through the tests' fake NVIDIA libraries, cold (the driver asked) and warm
// (the GPU inventory kept from the last probe). Every iteration builds a
// fresh profile, as the agent does once per boot.
#include <dirent.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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

#ifdef WEIGHTPATH_FAKE_NVIDIA_DIR
// intel-sapphire-rapids with an NVIDIA driver's markers (the fingerprint's
// inputs), in a temporary directory with a state directory beside it.
class GpuServerTree {
 public:
  GpuServerTree() {
    std::string pattern = "/tmp/bench_probe_gpu_XXXXXX";
    root_ = mkdtemp(pattern.data());
    std::filesystem::copy(std::string(WEIGHTPATH_HARDWARE_DATA) + "/intel-sapphire-rapids",
                          root_ + "/tree",
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::copy_symlinks);
    Write("/proc/driver/nvidia/version",
          "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05\n");
    Write("/sys/bus/pci/devices/0000:19:00.0/vendor", "0x10de\n");
    Write("/sys/bus/pci/devices/0000:19:00.0/device", "0x2335\n");
    Write("/sys/bus/pci/devices/0000:19:00.0/class", "0x030200\n");
  }
  ~GpuServerTree() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  std::string tree() const { return root_ + "/tree"; }
  std::string cache() const { return root_ + "/gpu-inventory"; }

 private:
  void Write(const std::string& path, const std::string& text) {
    const std::filesystem::path host = tree() + path;
    std::filesystem::create_directories(host.parent_path());
    std::ofstream(host) << text;
  }
  std::string root_;
};

void ProbeGpuServer(benchmark::State& state, const std::string& nvml, bool warm) {
  GpuServerTree server;
  const auto filesystem = MakeRootedFilesystem(server.tree());
  ProbeEnvironment environment = TreeProbeEnvironment(*filesystem);
  if (!nvml.empty()) {
    environment.gpu_libraries.nvml = {std::string(WEIGHTPATH_FAKE_NVIDIA_DIR) + "/" + nvml + ".so"};
  }
  environment.gpu_libraries.cuda = {std::string(WEIGHTPATH_FAKE_NVIDIA_DIR) +
                                    "/fake_cuda_h200_slow.so"};
  if (warm) {
    environment.gpu_inventory_cache = server.cache();
    if (!ProbeHardware(environment).ok()) state.SkipWithError("the cold probe failed");
  }
  for (auto _ : state) {
    auto profile = ProbeHardware(environment);
    if (!profile.ok() || profile->gpus().empty() ||
        (warm && profile->gpu_inventory_source() != "cache")) {
      state.SkipWithError("the probe did not describe the GPU as expected");
      return;
    }
    benchmark::DoNotOptimize(profile);
  }
}

void BM_ProbeGpuColdCuInit250ms(benchmark::State& state) { ProbeGpuServer(state, "", false); }
BENCHMARK(BM_ProbeGpuColdCuInit250ms)->Unit(benchmark::kMillisecond)->Iterations(5);
void BM_ProbeGpuColdNvmlH200(benchmark::State& state) {
  ProbeGpuServer(state, "fake_nvml_h200", false);
}
BENCHMARK(BM_ProbeGpuColdNvmlH200)->Unit(benchmark::kMillisecond);
void BM_ProbeGpuColdNvml8xH100(benchmark::State& state) {
  ProbeGpuServer(state, "fake_nvml_dgx_h100", false);
}
BENCHMARK(BM_ProbeGpuColdNvml8xH100)->Unit(benchmark::kMillisecond);
void BM_ProbeGpuWarmCuInit250ms(benchmark::State& state) { ProbeGpuServer(state, "", true); }
BENCHMARK(BM_ProbeGpuWarmCuInit250ms)->Unit(benchmark::kMillisecond);
void BM_ProbeGpuWarmNvml8xH100(benchmark::State& state) {
  ProbeGpuServer(state, "fake_nvml_dgx_h100", true);
}
BENCHMARK(BM_ProbeGpuWarmNvml8xH100)->Unit(benchmark::kMillisecond);
#endif

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
