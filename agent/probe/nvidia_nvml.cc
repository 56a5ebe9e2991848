// NVML, declared here by hand: only the entry points the probe calls.
#include "absl/strings/str_cat.h"
#include "agent/probe/nvidia_gpu.h"
#include "agent/probe/shared_library.h"

// The handle and memory types under nvml.h's own names, at global scope: a
// function pointer whose type names a look-alike of ours would not be the
// type of the function dlsym() finds, which C++ leaves undefined (UBSan's
// -fsanitize=function reports the call when the library is instrumented, as
// the tests' stand-in driver is).
struct nvmlDevice_st;
struct nvmlMemory_st {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

namespace weightpath::probe {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = nvmlDevice_st*;
using NvmlMemory = nvmlMemory_st;
constexpr NvmlReturn kNvmlSuccess = 0;

using NvmlInit = NvmlReturn (*)();
using NvmlShutdown = NvmlReturn (*)();
using NvmlDeviceGetCount = NvmlReturn (*)(unsigned int*);
using NvmlDeviceGetHandleByIndex = NvmlReturn (*)(unsigned int, NvmlDevice*);
using NvmlDeviceGetName = NvmlReturn (*)(NvmlDevice, char*, unsigned int);
using NvmlDeviceGetMemoryInfo = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
using NvmlDeviceGetCudaComputeCapability = NvmlReturn (*)(NvmlDevice, int*, int*);

struct NvmlApi {
  NvmlInit init;
  NvmlShutdown shutdown;
  NvmlDeviceGetCount get_count;
  NvmlDeviceGetHandleByIndex get_handle;
  NvmlDeviceGetName get_name;
  NvmlDeviceGetMemoryInfo get_memory;
  NvmlDeviceGetCudaComputeCapability get_capability;
};

absl::StatusOr<NvmlApi> ResolveNvmlApi(const SharedLibrary& library) {
  auto init = library.Function<NvmlInit>("nvmlInit_v2");
  auto shutdown = library.Function<NvmlShutdown>("nvmlShutdown");
  auto get_count = library.Function<NvmlDeviceGetCount>("nvmlDeviceGetCount_v2");
  auto get_handle = library.Function<NvmlDeviceGetHandleByIndex>("nvmlDeviceGetHandleByIndex_v2");
  auto get_name = library.Function<NvmlDeviceGetName>("nvmlDeviceGetName");
  auto get_memory = library.Function<NvmlDeviceGetMemoryInfo>("nvmlDeviceGetMemoryInfo");
  auto get_capability =
      library.Function<NvmlDeviceGetCudaComputeCapability>("nvmlDeviceGetCudaComputeCapability");
  for (const absl::Status& status :
       {init.status(), shutdown.status(), get_count.status(), get_handle.status(),
        get_name.status(), get_memory.status(), get_capability.status()}) {
    if (!status.ok()) return status;
  }
  return NvmlApi{*init, *shutdown, *get_count, *get_handle, *get_name, *get_memory,
                 *get_capability};
}

}  // namespace

NvidiaQuery QueryWithNvml(const std::vector<std::string>& names) {
  NvidiaQuery query;
  for (const std::string& name : names) {
    auto library = SharedLibrary::Open(name);
    if (!library.ok()) continue;  // absent: no NVIDIA driver here, not a fault
    auto api = ResolveNvmlApi(*library);
    if (!api.ok()) {
      query.notes.push_back(std::string(api.status().message()));
      continue;
    }
    if (const NvmlReturn result = api->init(); result != kNvmlSuccess) {
      query.notes.push_back(absl::StrCat(name, ": nvmlInit_v2 failed with nvmlReturn ", result,
                                         ", so no NVIDIA GPU is usable"));
      return query;
    }
    unsigned int count = 0;
    if (api->get_count(&count) != kNvmlSuccess) {
      query.notes.push_back(absl::StrCat(name, ": nvmlDeviceGetCount_v2 failed"));
      count = 0;
    }
    for (unsigned int index = 0; index < count; ++index) {
      NvmlDevice device = nullptr;
      char device_name[256] = {};
      NvmlMemory memory = {};
      int major = 0, minor = 0;
      if (api->get_handle(index, &device) != kNvmlSuccess ||
          api->get_name(device, device_name, sizeof(device_name) - 1) != kNvmlSuccess ||
          api->get_memory(device, &memory) != kNvmlSuccess ||
          api->get_capability(device, &major, &minor) != kNvmlSuccess) {
        query.notes.push_back(absl::StrCat(name, ": NVML device ", index, " could not be described"));
        continue;
      }
      NvidiaGpu& gpu = query.gpus.emplace_back();
      gpu.name = device_name;
      gpu.memory_bytes = memory.total;
      gpu.capability_major = static_cast<uint32_t>(major);
      gpu.capability_minor = static_cast<uint32_t>(minor);
      gpu.library = name;
    }
    api->shutdown();
    return query;
  }
  return query;
}

}  // namespace weightpath::probe
