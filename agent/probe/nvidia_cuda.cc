// CUDA driver API, declared here by hand: only the handful of entry points
// the probe calls, with the ABI the driver has kept stable since CUDA 3.2.
#include <cstdio>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/probe/nvidia_gpu.h"
#include "agent/probe/shared_library.h"

// cuda.h's CUuuid, at global scope under its own name (see nvidia_nvml.cc).
struct CUuuid_st {
  char bytes[16];
};

namespace weightpath::probe {
namespace {

using CuResult = int;  // CUresult; 0 is CUDA_SUCCESS
using CuDevice = int;
constexpr CuResult kCudaSuccess = 0;
constexpr CuResult kCudaErrorNoDevice = 100;
constexpr int kAttributeMultiprocessorCount = 16;
constexpr int kAttributeIntegrated = 18;
constexpr int kAttributeCapabilityMajor = 75;
constexpr int kAttributeCapabilityMinor = 76;

using CuInit = CuResult (*)(unsigned int);
using CuDeviceGetCount = CuResult (*)(int*);
using CuDeviceGet = CuResult (*)(CuDevice*, int);
using CuDeviceGetName = CuResult (*)(char*, int, CuDevice);
using CuDeviceTotalMem = CuResult (*)(size_t*, CuDevice);
using CuDeviceGetAttribute = CuResult (*)(int*, int, CuDevice);
using CuDeviceGetUuid = CuResult (*)(CUuuid_st*, CuDevice);
using CuDeviceGetPciBusId = CuResult (*)(char*, int, CuDevice);
using CuDriverGetVersion = CuResult (*)(int*);

struct CudaApi {
  CuInit init;
  CuDeviceGetCount get_count;
  CuDeviceGet get_device;
  CuDeviceGetName get_name;
  CuDeviceTotalMem total_mem;
  CuDeviceGetAttribute get_attribute;
  // Optional: left unknown when the driver lacks them.
  CuDeviceGetUuid get_uuid = nullptr;
  CuDeviceGetPciBusId get_pci_bus_id = nullptr;
  CuDriverGetVersion get_version = nullptr;
};

absl::StatusOr<CudaApi> ResolveCudaApi(const SharedLibrary& library) {
  CudaApi api;
  auto init = library.Function<CuInit>("cuInit");
  auto get_count = library.Function<CuDeviceGetCount>("cuDeviceGetCount");
  auto get_device = library.Function<CuDeviceGet>("cuDeviceGet");
  auto get_name = library.Function<CuDeviceGetName>("cuDeviceGetName");
  auto total_mem = library.Function<CuDeviceTotalMem>("cuDeviceTotalMem_v2");
  auto get_attribute = library.Function<CuDeviceGetAttribute>("cuDeviceGetAttribute");
  for (const absl::Status& status : {init.status(), get_count.status(), get_device.status(),
                                     get_name.status(), total_mem.status(),
                                     get_attribute.status()}) {
    if (!status.ok()) return status;
  }
  api = {*init, *get_count, *get_device, *get_name, *total_mem, *get_attribute};
  if (auto uuid = library.Function<CuDeviceGetUuid>("cuDeviceGetUuid_v2"); uuid.ok()) {
    api.get_uuid = *uuid;
  }
  if (auto bus = library.Function<CuDeviceGetPciBusId>("cuDeviceGetPCIBusId"); bus.ok()) {
    api.get_pci_bus_id = *bus;
  }
  if (auto version = library.Function<CuDriverGetVersion>("cuDriverGetVersion"); version.ok()) {
    api.get_version = *version;
  }
  return api;
}

// nvidia-smi's spelling: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string UuidText(const CUuuid_st& uuid) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
  }
  return text;
}

std::optional<NvidiaGpu> DescribeDevice(const CudaApi& api, int ordinal, const std::string& library,
                                        std::vector<std::string>* notes) {
  CuDevice device = 0;
  char name[96] = {};
  size_t memory = 0;
  int major = 0, minor = 0, sm_count = 0, integrated = 0;
  if (api.get_device(&device, ordinal) != kCudaSuccess ||
      api.get_name(name, sizeof(name) - 1, device) != kCudaSuccess ||
      api.total_mem(&memory, device) != kCudaSuccess ||
      api.get_attribute(&major, kAttributeCapabilityMajor, device) != kCudaSuccess ||
      api.get_attribute(&minor, kAttributeCapabilityMinor, device) != kCudaSuccess ||
      api.get_attribute(&sm_count, kAttributeMultiprocessorCount, device) != kCudaSuccess ||
      api.get_attribute(&integrated, kAttributeIntegrated, device) != kCudaSuccess || major < 0 ||
      minor < 0 || sm_count < 0) {
    notes->push_back(absl::StrCat(library, ": CUDA device ", ordinal, " could not be described"));
    return std::nullopt;
  }
  NvidiaGpu gpu;
  gpu.index = static_cast<uint32_t>(ordinal);
  gpu.name = std::string(name, strnlen(name, sizeof(name)));
  gpu.memory_bytes = memory;
  gpu.capability_major = static_cast<uint32_t>(major);
  gpu.capability_minor = static_cast<uint32_t>(minor);
  gpu.sm_count = static_cast<uint32_t>(sm_count);
  gpu.integrated = integrated != 0;
  gpu.library = library;
  CUuuid_st uuid = {};
  if (api.get_uuid != nullptr && api.get_uuid(&uuid, device) == kCudaSuccess) {
    gpu.uuid = UuidText(uuid);
  }
  char bus[32] = {};
  if (api.get_pci_bus_id != nullptr &&
      api.get_pci_bus_id(bus, sizeof(bus) - 1, device) == kCudaSuccess) {
    gpu.pci_bus_id = std::string(bus, strnlen(bus, sizeof(bus)));
  }
  return gpu;
}

}  // namespace

NvidiaQuery QueryWithCuda(const std::vector<std::string>& names) {
  NvidiaQuery query;
  for (const std::string& name : names) {
    auto library = SharedLibrary::Open(name);
    if (!library.ok()) continue;  // absent: no CUDA driver here, not a fault
    auto api = ResolveCudaApi(*library);
    if (!api.ok()) {
      query.notes.push_back(std::string(api.status().message()));
      continue;
    }
    if (const CuResult result = api->init(0); result != kCudaSuccess) {
      query.cuda_saw_no_device = result == kCudaErrorNoDevice;
      query.notes.push_back(
          absl::StrCat(name, ": cuInit failed with CUresult ", result, ", so no CUDA GPU is usable"));
      return query;
    }
    query.source = "cuda";
    query.visibility_applied_by_driver = true;
    int version = 0;
    if (api->get_version != nullptr && api->get_version(&version) == kCudaSuccess) {
      query.cuda_driver_version = CudaVersionText(version);
    }
    int count = 0;
    if (api->get_count(&count) != kCudaSuccess) {
      query.notes.push_back(absl::StrCat(name, ": cuDeviceGetCount failed"));
      return query;
    }
    if (count > static_cast<int>(kMaxNvidiaGpus)) {
      query.notes.push_back(absl::StrCat(name, ": CUDA reports ", count, " GPUs; the first ",
                                         kMaxNvidiaGpus, " are described"));
      count = static_cast<int>(kMaxNvidiaGpus);
    }
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      if (auto gpu = DescribeDevice(*api, ordinal, name, &query.notes)) {
        query.gpus.push_back(std::move(*gpu));
      } else {
        query.complete = false;
      }
    }
    // The CUDA driver stays loaded once initialised: it registers
    // exit-time handlers, and unloading it underneath them risks a crash at
    // process exit for no gain in a process that probes once.
    static std::vector<SharedLibrary>* kept_loaded = new std::vector<SharedLibrary>();
    kept_loaded->push_back(std::move(*library));
    return query;
  }
  return query;
}

}  // namespace weightpath::probe
