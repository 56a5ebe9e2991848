// A stand-in for libcuda.so.1 with one canned GPU, so the probe's dlopen path
// runs for real on a machine without an NVIDIA GPU. The GPU's figures come
// from compile definitions set in tests/probe/CMakeLists.txt.
#include <cstddef>
#include <cstring>

extern "C" {

int cuInit(unsigned int) { return 0; }
int cuDeviceGetCount(int* count) {
  *count = 1;
  return 0;
}
int cuDeviceGet(int* device, int ordinal) {
  if (ordinal != 0) return 101;  // CUDA_ERROR_INVALID_DEVICE
  *device = 0;
  return 0;
}
int cuDeviceGetName(char* name, int length, int) {
  std::strncpy(name, FAKE_GPU_NAME, static_cast<size_t>(length));
  return 0;
}
int cuDeviceTotalMem_v2(size_t* bytes, int) {
  *bytes = FAKE_GPU_MEMORY;
  return 0;
}
int cuDeviceGetAttribute(int* value, int attribute, int) {
  switch (attribute) {
    case 16: *value = FAKE_SM_COUNT; return 0;   // MULTIPROCESSOR_COUNT
    case 18: *value = FAKE_INTEGRATED; return 0;  // INTEGRATED
    case 75: *value = FAKE_CC_MAJOR; return 0;   // COMPUTE_CAPABILITY_MAJOR
    case 76: *value = FAKE_CC_MINOR; return 0;   // COMPUTE_CAPABILITY_MINOR
    default: return 1;                           // CUDA_ERROR_INVALID_VALUE
  }
}

}  // extern "C"
