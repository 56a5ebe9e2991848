// A stand-in for libnvidia-ml.so.1 with one canned GPU, so the probe's dlopen
// path runs for real on a machine without an NVIDIA GPU. The GPU's figures
// come from compile definitions set in tests/probe/CMakeLists.txt.
#include <cstring>

namespace {
struct FakeDevice {};
FakeDevice the_device;
}  // namespace

extern "C" {

struct FakeNvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

int nvmlInit_v2() { return FAKE_INIT_RESULT; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 1;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &the_device;
  return 0;
}
int nvmlDeviceGetName(void*, char* name, unsigned int length) {
  std::strncpy(name, FAKE_GPU_NAME, length);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, FakeNvmlMemory* memory) {
  memory->total = FAKE_GPU_MEMORY;
  memory->free = FAKE_GPU_MEMORY;
  memory->used = 0;
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(void*, int* major, int* minor) {
  *major = FAKE_CC_MAJOR;
  *minor = FAKE_CC_MINOR;
  return 0;
}

}  // extern "C"
