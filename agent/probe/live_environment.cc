// The seams of ProbeEnvironment as the live machine answers them.
#include <sched.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "agent/probe/probe.h"

namespace weightpath::probe {

AmxPermission RequestAmxPermissionFromKernel() {
#if defined(__x86_64__) && defined(SYS_arch_prctl)
  // Since Linux 5.16 a process must ask for the AMX tile data state before
  // using it; a kernel that refuses (older kernel, or a hypervisor that
  // does not expose XTILEDATA) would kill the first AMX instruction with
  // SIGILL, whatever cpuinfo says.
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtileData = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0) {
    return {AmxPermission::Answer::kGranted, ""};
  }
  return {AmxPermission::Answer::kRefused, std::strerror(errno)};
#else
  return {AmxPermission::Answer::kRefused, "not an x86_64 build"};
#endif
}

std::optional<uint32_t> AllowedCpuCountFromKernel() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::nullopt;
  return static_cast<uint32_t>(CPU_COUNT(&set));
}

namespace {

std::optional<std::string> UnameMachine() {
  utsname names;
  if (uname(&names) != 0) return std::nullopt;
  return std::string(names.machine);
}

}  // namespace

ProbeEnvironment TreeProbeEnvironment(const Filesystem& filesystem) {
  ProbeEnvironment environment;
  environment.filesystem = &filesystem;
  return environment;
}

ProbeEnvironment LiveProbeEnvironment(const Filesystem& filesystem, const std::string& state_dir) {
  ProbeEnvironment environment = TreeProbeEnvironment(filesystem);
  for (const char* variable : {kProfileFileVariable, kSeedProfileFileVariable,
                               kCudaVisibleDevicesVariable, kCudaDeviceOrderVariable}) {
    if (const char* value = std::getenv(variable)) environment.environment_variables[variable] = value;
  }
  if (filesystem.root() != "/") return environment;
  environment.kernel_arch = UnameMachine();
  environment.gpu_libraries.cuda = {"libcuda.so.1"};
  environment.gpu_libraries.nvml = {"libnvidia-ml.so.1"};
  if (!state_dir.empty()) {
    environment.gpu_inventory_cache = state_dir + "/" + kGpuInventoryFileName;
  }
  environment.request_amx_permission = RequestAmxPermissionFromKernel;
  environment.allowed_cpu_count = AllowedCpuCountFromKernel;
  return environment;
}

}  // namespace weightpath::probe
