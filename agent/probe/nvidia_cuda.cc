// CUDA driver API, declared here by hand: only the handful of entry points
// the probe calls, with the ABI the driver has kept stable since CUDA 3.2.
#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/probe/nvidia_gpu.h"
#include "agent/probe/shared_library.h"

namespace weightpath::probe {
namespace {

using CuResult = int;  // CUresult; 0 is CUDA_SUCCESS
using CuDevice = int;
constexpr CuResult kCudaSuccess = 0;
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

struct CudaApi {
  CuInit init;
  CuDeviceGetCount get_count;
  CuDeviceGet get_device;
  CuDeviceGetName get_name;
  CuDeviceTotalMem total_mem;
  CuDeviceGetAttribute get_attribute;
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
  return api;
}

std::optional<NvidiaGpu> DescribeDevice(const CudaApi& api, int ordinal, const std::string& library,
                                        std::vector<std::string>* notes) {
  CuDevice device = 0;
  char name[256] = {};
  size_t memory = 0;
  int major = 0, minor = 0, sm_count = 0, integrated = 0;
  if (api.get_device(&device, ordinal) != kCudaSuccess ||
      api.get_name(name, sizeof(name) - 1, device) != kCudaSuccess ||
      api.total_mem(&memory, device) != kCudaSuccess ||
      api.get_attribute(&major, kAttributeCapabilityMajor, device) != kCudaSuccess ||
      api.get_attribute(&minor, kAttributeCapabilityMinor, device) != kCudaSuccess ||
      api.get_attribute(&sm_count, kAttributeMultiprocessorCount, device) != kCudaSuccess ||
      api.get_attribute(&integrated, kAttributeIntegrated, device) != kCudaSuccess) {
    notes->push_back(absl::StrCat(library, ": CUDA device ", ordinal, " could not be described"));
    return std::nullopt;
  }
  NvidiaGpu gpu;
  gpu.name = name;
  gpu.memory_bytes = memory;
  gpu.capability_major = static_cast<uint32_t>(major);
  gpu.capability_minor = static_cast<uint32_t>(minor);
  gpu.sm_count = static_cast<uint32_t>(sm_count);
  gpu.integrated = integrated != 0;
  gpu.library = library;
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
      query.notes.push_back(
          absl::StrCat(name, ": cuInit failed with CUresult ", result, ", so no CUDA GPU is usable"));
      return query;
    }
    int count = 0;
    if (api->get_count(&count) != kCudaSuccess) {
      query.notes.push_back(absl::StrCat(name, ": cuDeviceGetCount failed"));
      return query;
    }
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      if (auto gpu = DescribeDevice(*api, ordinal, name, &query.notes)) {
        query.gpus.push_back(std::move(*gpu));
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
