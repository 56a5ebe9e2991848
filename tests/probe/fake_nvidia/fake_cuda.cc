// A stand-in for libcuda.so.1 describing one of fake_machines.h's machines,
// so the probe's dlopen path runs for real on a machine without an NVIDIA
// GPU. FAKE_INIT_DELAY_MS makes cuInit as slow as a real one (about 250 ms
// on an H200 with persistence mode on); an empty CUDA_VISIBLE_DEVICES makes
// it fail with CUDA_ERROR_NO_DEVICE, as the real driver does.
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "fake_machines.h"

#ifndef FAKE_INIT_DELAY_MS
#define FAKE_INIT_DELAY_MS 0
#endif

struct CUuuid_st {
  char bytes[16];
};

namespace {
bool Valid(int device) { return device >= 0 && device < kGpuCount; }
}  // namespace

extern "C" {

int cuInit(unsigned int) {
  if (FAKE_INIT_DELAY_MS > 0) usleep(FAKE_INIT_DELAY_MS * 1000);
  // The driver's reading, as far as these one-GPU machines need it: an
  // empty variable or an index past the GPUs leaves no device.
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (kGpuCount == 0 || (visible != nullptr && *visible == '\0')) return 100;
  if (visible != nullptr) {
    char* end = nullptr;
    const long index = std::strtol(visible, &end, 10);
    if (end != visible && index >= kGpuCount) return 100;
  }
  return 0;
}
int cuDriverGetVersion(int* version) {
  *version = 13000;
  return 0;
}
int cuDeviceGetCount(int* count) {
  *count = kGpuCount;
  return 0;
}
int cuDeviceGet(int* device, int ordinal) {
  if (!Valid(ordinal)) return 101;  // CUDA_ERROR_INVALID_DEVICE
  *device = ordinal;
  return 0;
}
int cuDeviceGetName(char* name, int length, int device) {
  if (!Valid(device)) return 101;
  std::strncpy(name, kGpus[device].name, static_cast<size_t>(length));
  return 0;
}
int cuDeviceTotalMem_v2(size_t* bytes, int device) {
  if (!Valid(device)) return 101;
  *bytes = kGpus[device].memory;
  return 0;
}
int cuDeviceGetUuid_v2(CUuuid_st* uuid, int device) {
  if (!Valid(device)) return 101;
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = static_cast<char>(0x10 * device + i);
  return 0;
}
int cuDeviceGetPCIBusId(char* bus, int length, int device) {
  if (!Valid(device)) return 101;
  std::strncpy(bus, kGpus[device].pci_bus_id, static_cast<size_t>(length));
  return 0;
}
int cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (!Valid(device)) return 101;
  switch (attribute) {
    case 16: *value = static_cast<int>(kGpus[device].sms); return 0;  // MULTIPROCESSOR_COUNT
    case 18: *value = kGpus[device].integrated; return 0;            // INTEGRATED
    case 75: *value = kGpus[device].cc_major; return 0;              // COMPUTE_CAPABILITY_MAJOR
    case 76: *value = kGpus[device].cc_minor; return 0;              // COMPUTE_CAPABILITY_MINOR
    default: return 1;                                               // CUDA_ERROR_INVALID_VALUE
  }
}

}  // extern "C"
