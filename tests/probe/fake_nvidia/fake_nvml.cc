// A stand-in for libnvidia-ml.so.1 with one canned GPU, so the probe's dlopen
// path runs for real on a machine without an NVIDIA GPU. The GPU's figures
// come from compile definitions set in tests/probe/CMakeLists.txt.
#include <cstring>

// nvml.h's types, as agent/probe/nvidia_nvml.cc declares them: the probe
// calls these through pointers of exactly these function types.
struct nvmlDevice_st {};
struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

namespace {
nvmlDevice_st the_device;
}  // namespace

extern "C" {

int nvmlInit_v2() { return FAKE_INIT_RESULT; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 1;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_st** device) {
  if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &the_device;
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_st*, char* name, unsigned int length) {
  std::strncpy(name, FAKE_GPU_NAME, length);
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_st*, nvmlMemory_st* memory) {
  memory->total = FAKE_GPU_MEMORY;
  memory->free = FAKE_GPU_MEMORY;
  memory->used = 0;
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(nvmlDevice_st*, int* major, int* minor) {
  *major = FAKE_CC_MAJOR;
  *minor = FAKE_CC_MINOR;
  return 0;
}

}  // extern "C"
