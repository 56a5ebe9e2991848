#include "agent/probe/nvidia_gpu.h"

#include "absl/strings/str_cat.h"

namespace weightpath::probe {

NvidiaQuery QueryNvidiaGpus(const GpuLibraryNames& libraries) {
  NvidiaQuery nvml = QueryWithNvml(libraries.nvml);
  if (!nvml.gpus.empty() && nvml.complete) return nvml;
  NvidiaQuery cuda = QueryWithCuda(libraries.cuda);
  if (cuda.gpus.empty() && !nvml.gpus.empty()) {
    nvml.notes.insert(nvml.notes.end(), cuda.notes.begin(), cuda.notes.end());
    return nvml;  // what NVML could describe beats nothing
  }
  cuda.notes.insert(cuda.notes.begin(), nvml.notes.begin(), nvml.notes.end());
  // Versions NVML did read are still true when only CUDA could list GPUs.
  if (cuda.driver_version.empty()) cuda.driver_version = nvml.driver_version;
  if (cuda.cuda_driver_version.empty()) cuda.cuda_driver_version = nvml.cuda_driver_version;
  return cuda;
}

uint32_t SmCountFromCudaCores(uint32_t cores, uint32_t major, uint32_t minor) {
  // CUDA cores per SM by architecture (CUDA programming guide's arithmetic
  // instruction tables): Volta/Turing and GA100 64, GA10x, Ada, Hopper and
  // Blackwell 128.
  uint32_t per_sm = 0;
  if (major == 7 || (major == 8 && minor == 0)) {
    per_sm = 64;
  } else if (major == 8 || major == 9 || major == 10 || major == 11 || major == 12) {
    per_sm = 128;
  }
  if (per_sm == 0 || cores == 0 || cores % per_sm != 0) return 0;
  return cores / per_sm;
}

std::string CudaVersionText(int version) {
  if (version <= 0) return "";
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

std::string MigProfileFromName(const std::string& name) {
  const size_t at = name.rfind(" MIG ");
  if (at == std::string::npos) return "";
  return name.substr(at + 5);
}

}  // namespace weightpath::probe
