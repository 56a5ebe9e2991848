// NVML, declared here by hand: only the entry points the probe calls.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "agent/probe/nvidia_gpu.h"
#include "agent/probe/shared_library.h"

// The handle and struct types under nvml.h's own names, at global scope: a
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
struct nvmlPciInfo_st {  // nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v3 fills it
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
struct nvmlDeviceAttributes_st {  // nvmlDeviceAttributes_t (MIG device handles)
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};

namespace weightpath::probe {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = nvmlDevice_st*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned int kNvmlMigEnabled = 1;

using NvmlInit = NvmlReturn (*)();
using NvmlShutdown = NvmlReturn (*)();
using NvmlDeviceGetCount = NvmlReturn (*)(unsigned int*);
using NvmlDeviceGetHandleByIndex = NvmlReturn (*)(unsigned int, NvmlDevice*);
using NvmlDeviceGetText = NvmlReturn (*)(NvmlDevice, char*, unsigned int);
using NvmlDeviceGetMemoryInfo = NvmlReturn (*)(NvmlDevice, nvmlMemory_st*);
using NvmlDeviceGetCudaComputeCapability = NvmlReturn (*)(NvmlDevice, int*, int*);
using NvmlDeviceGetPciInfo = NvmlReturn (*)(NvmlDevice, nvmlPciInfo_st*);
using NvmlDeviceGetUint = NvmlReturn (*)(NvmlDevice, unsigned int*);
using NvmlDeviceGetMigMode = NvmlReturn (*)(NvmlDevice, unsigned int*, unsigned int*);
using NvmlDeviceGetMigDeviceHandleByIndex = NvmlReturn (*)(NvmlDevice, unsigned int, NvmlDevice*);
using NvmlDeviceGetAttributes = NvmlReturn (*)(NvmlDevice, nvmlDeviceAttributes_st*);
using NvmlSystemGetDriverVersion = NvmlReturn (*)(char*, unsigned int);
using NvmlSystemGetCudaDriverVersion = NvmlReturn (*)(int*);

// Entry points every NVML since CUDA 8 exports; the probe needs all of them.
struct NvmlApi {
  NvmlInit init;
  NvmlShutdown shutdown;
  NvmlDeviceGetCount get_count;
  NvmlDeviceGetHandleByIndex get_handle;
  NvmlDeviceGetText get_name;
  NvmlDeviceGetMemoryInfo get_memory;
  NvmlDeviceGetCudaComputeCapability get_capability;
};

// Newer or optional entry points: a driver without one leaves its field
// unknown rather than losing the GPU.
struct NvmlExtras {
  NvmlDeviceGetText get_uuid = nullptr;
  NvmlDeviceGetPciInfo get_pci = nullptr;
  NvmlDeviceGetUint get_cores = nullptr;
  NvmlDeviceGetMigMode get_mig_mode = nullptr;
  NvmlDeviceGetUint get_max_mig = nullptr;
  NvmlDeviceGetMigDeviceHandleByIndex get_mig_handle = nullptr;
  NvmlDeviceGetAttributes get_attributes = nullptr;
  NvmlDeviceGetUint get_gpu_instance_id = nullptr;
  NvmlDeviceGetUint get_compute_instance_id = nullptr;
  NvmlSystemGetDriverVersion get_driver_version = nullptr;
  NvmlSystemGetCudaDriverVersion get_cuda_version = nullptr;
};

absl::StatusOr<NvmlApi> ResolveNvmlApi(const SharedLibrary& library) {
  auto init = library.Function<NvmlInit>("nvmlInit_v2");
  auto shutdown = library.Function<NvmlShutdown>("nvmlShutdown");
  auto get_count = library.Function<NvmlDeviceGetCount>("nvmlDeviceGetCount_v2");
  auto get_handle = library.Function<NvmlDeviceGetHandleByIndex>("nvmlDeviceGetHandleByIndex_v2");
  auto get_name = library.Function<NvmlDeviceGetText>("nvmlDeviceGetName");
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

template <typename Function>
Function Optional(const SharedLibrary& library, const char* symbol) {
  auto function = library.Function<Function>(symbol);
  return function.ok() ? *function : nullptr;
}

NvmlExtras ResolveNvmlExtras(const SharedLibrary& library) {
  NvmlExtras extras;
  extras.get_uuid = Optional<NvmlDeviceGetText>(library, "nvmlDeviceGetUUID");
  extras.get_pci = Optional<NvmlDeviceGetPciInfo>(library, "nvmlDeviceGetPciInfo_v3");
  extras.get_cores = Optional<NvmlDeviceGetUint>(library, "nvmlDeviceGetNumGpuCores");
  extras.get_mig_mode = Optional<NvmlDeviceGetMigMode>(library, "nvmlDeviceGetMigMode");
  extras.get_max_mig = Optional<NvmlDeviceGetUint>(library, "nvmlDeviceGetMaxMigDeviceCount");
  extras.get_mig_handle =
      Optional<NvmlDeviceGetMigDeviceHandleByIndex>(library, "nvmlDeviceGetMigDeviceHandleByIndex");
  extras.get_attributes = Optional<NvmlDeviceGetAttributes>(library, "nvmlDeviceGetAttributes_v2");
  extras.get_gpu_instance_id = Optional<NvmlDeviceGetUint>(library, "nvmlDeviceGetGpuInstanceId");
  extras.get_compute_instance_id =
      Optional<NvmlDeviceGetUint>(library, "nvmlDeviceGetComputeInstanceId");
  extras.get_driver_version =
      Optional<NvmlSystemGetDriverVersion>(library, "nvmlSystemGetDriverVersion");
  extras.get_cuda_version =
      Optional<NvmlSystemGetCudaDriverVersion>(library, "nvmlSystemGetCudaDriverVersion_v2");
  return extras;
}

// A driver string read into a zeroed buffer one longer than the driver is
// told, so it ends in NUL whatever the driver wrote.
template <size_t N>
std::string BoundedText(const char (&buffer)[N]) {
  return std::string(buffer, strnlen(buffer, N));
}

std::string DeviceText(NvmlDeviceGetText function, NvmlDevice device) {
  if (function == nullptr) return "";
  char text[96] = {};
  if (function(device, text, sizeof(text) - 1) != kNvmlSuccess) return "";
  return BoundedText(text);
}

void DescribeMigInstances(const NvmlApi& api, const NvmlExtras& extras, NvmlDevice parent,
                          const std::string& library, NvidiaGpu* gpu,
                          std::vector<std::string>* notes) {
  if (extras.get_mig_mode == nullptr) return;
  unsigned int current = 0, pending = 0;
  if (extras.get_mig_mode(parent, &current, &pending) != kNvmlSuccess) return;  // not MIG-capable
  gpu->mig_enabled = current == kNvmlMigEnabled;
  if (!gpu->mig_enabled) return;
  if (extras.get_max_mig == nullptr || extras.get_mig_handle == nullptr) {
    notes->push_back(absl::StrCat(library, ": GPU ", gpu->index,
                                  " has MIG enabled but this NVML cannot list its instances"));
    return;
  }
  unsigned int slots = 0;
  if (extras.get_max_mig(parent, &slots) != kNvmlSuccess) slots = 0;
  // Slots without an instance answer NVML_ERROR_NOT_FOUND; they are skipped.
  for (unsigned int slot = 0; slot < std::min(slots, kMaxMigInstancesPerGpu); ++slot) {
    NvmlDevice device = nullptr;
    if (extras.get_mig_handle(parent, slot, &device) != kNvmlSuccess || device == nullptr) continue;
    NvidiaMigInstance instance;
    instance.uuid = DeviceText(extras.get_uuid, device);
    instance.profile = MigProfileFromName(DeviceText(api.get_name, device));
    // The slice's own memory: the MIG handle answers for the slice, the
    // parent's handle would answer for the whole GPU.
    nvmlMemory_st memory = {};
    if (api.get_memory(device, &memory) == kNvmlSuccess) {
      instance.memory_total_bytes = memory.total;
      instance.memory_free_bytes = memory.free;
    }
    nvmlDeviceAttributes_st attributes = {};
    if (extras.get_attributes != nullptr &&
        extras.get_attributes(device, &attributes) == kNvmlSuccess) {
      instance.sm_count = attributes.multiprocessorCount;
      if (instance.memory_total_bytes == 0) {
        instance.memory_total_bytes = attributes.memorySizeMB << 20;
      }
    }
    unsigned int id = 0;
    if (extras.get_gpu_instance_id != nullptr &&
        extras.get_gpu_instance_id(device, &id) == kNvmlSuccess) {
      instance.gpu_instance_id = id;
    }
    if (extras.get_compute_instance_id != nullptr &&
        extras.get_compute_instance_id(device, &id) == kNvmlSuccess) {
      instance.compute_instance_id = id;
    }
    gpu->mig_instances.push_back(std::move(instance));
  }
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
                                         ", so no NVIDIA GPU is usable through NVML"));
      return query;
    }
    query.source = "nvml";
    const NvmlExtras extras = ResolveNvmlExtras(*library);
    if (extras.get_driver_version != nullptr) {
      char version[96] = {};
      if (extras.get_driver_version(version, sizeof(version) - 1) == kNvmlSuccess) {
        query.driver_version = BoundedText(version);
      }
    }
    int cuda_version = 0;
    if (extras.get_cuda_version != nullptr && extras.get_cuda_version(&cuda_version) == kNvmlSuccess) {
      query.cuda_driver_version = CudaVersionText(cuda_version);
    }
    unsigned int count = 0;
    if (api->get_count(&count) != kNvmlSuccess) {
      query.notes.push_back(absl::StrCat(name, ": nvmlDeviceGetCount_v2 failed"));
      count = 0;
    }
    if (count > kMaxNvidiaGpus) {
      query.notes.push_back(absl::StrCat(name, ": NVML reports ", count, " GPUs; the first ",
                                         kMaxNvidiaGpus, " are described"));
      count = kMaxNvidiaGpus;
    }
    for (unsigned int index = 0; index < count; ++index) {
      NvmlDevice device = nullptr;
      char device_name[96] = {};
      nvmlMemory_st memory = {};
      int major = 0, minor = 0;
      if (api->get_handle(index, &device) != kNvmlSuccess ||
          api->get_name(device, device_name, sizeof(device_name) - 1) != kNvmlSuccess ||
          api->get_memory(device, &memory) != kNvmlSuccess ||
          api->get_capability(device, &major, &minor) != kNvmlSuccess || major < 0 || minor < 0) {
        query.notes.push_back(absl::StrCat(name, ": NVML device ", index, " could not be described"));
        query.complete = false;
        continue;
      }
      NvidiaGpu& gpu = query.gpus.emplace_back();
      gpu.index = index;
      gpu.name = BoundedText(device_name);
      gpu.memory_bytes = memory.total;
      gpu.memory_free_bytes = memory.free;
      gpu.capability_major = static_cast<uint32_t>(major);
      gpu.capability_minor = static_cast<uint32_t>(minor);
      gpu.uuid = DeviceText(extras.get_uuid, device);
      nvmlPciInfo_st pci = {};
      if (extras.get_pci != nullptr && extras.get_pci(device, &pci) == kNvmlSuccess) {
        gpu.pci_bus_id = BoundedText(pci.busId);
      }
      unsigned int cores = 0;
      if (extras.get_cores != nullptr && extras.get_cores(device, &cores) == kNvmlSuccess) {
        gpu.sm_count = SmCountFromCudaCores(cores, gpu.capability_major, gpu.capability_minor);
      }
      DescribeMigInstances(*api, extras, device, name, &gpu, &query.notes);
      gpu.library = name;
    }
    api->shutdown();
    return query;
  }
  return query;
}

}  // namespace weightpath::probe
