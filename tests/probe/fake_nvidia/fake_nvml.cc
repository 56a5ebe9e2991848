// A stand-in for libnvidia-ml.so.1 describing one of fake_machines.h's
// machines, so the probe's dlopen path runs for real on a machine without an
// NVIDIA GPU. Like the real NVML it ignores CUDA_VISIBLE_DEVICES.
#include <cstring>

#include "fake_machines.h"

#ifndef FAKE_INIT_RESULT
#define FAKE_INIT_RESULT 0
#endif

// nvml.h's types, as agent/probe/nvidia_nvml.cc declares them: the probe
// calls these through pointers of exactly these function types.
struct nvmlDevice_st {
  int gpu;
  int mig;  // -1: the whole GPU
};
struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
struct nvmlDeviceAttributes_st {
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

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;

nvmlDevice_st the_devices[8][8];  // [gpu][mig + 1]

nvmlDevice_st* Handle(int gpu, int mig) {
  nvmlDevice_st* device = &the_devices[gpu][mig + 1];
  device->gpu = gpu;
  device->mig = mig;
  return device;
}

int CopyText(const char* text, char* out, unsigned int length) {
  if (std::strlen(text) + 1 > length) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::strcpy(out, text);
  return kSuccess;
}

}  // namespace

extern "C" {

int nvmlInit_v2() { return FAKE_INIT_RESULT; }
int nvmlShutdown() { return kSuccess; }
int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return CopyText("580.95.05", version, length);
}
int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  *version = 13000;
  return kSuccess;
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(kGpuCount);
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_st** device) {
  if (index >= static_cast<unsigned int>(kGpuCount)) return kInvalidArgument;
  *device = Handle(static_cast<int>(index), -1);
  return kSuccess;
}
int nvmlDeviceGetName(nvmlDevice_st* device, char* name, unsigned int length) {
  const FakeGpu& gpu = kGpus[device->gpu];
  if (device->mig < 0) return CopyText(gpu.name, name, length);
  char text[96];
  std::strcpy(text, gpu.name);
  std::strcat(text, " MIG ");
  std::strcat(text, gpu.migs[device->mig].profile);
  return CopyText(text, name, length);
}
int nvmlDeviceGetUUID(nvmlDevice_st* device, char* uuid, unsigned int length) {
  const FakeGpu& gpu = kGpus[device->gpu];
  return CopyText(device->mig < 0 ? gpu.uuid : gpu.migs[device->mig].uuid, uuid, length);
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_st* device, nvmlMemory_st* memory) {
  const FakeGpu& gpu = kGpus[device->gpu];
  // An integrated GPU's NVML has no memory of its own to report.
  if (gpu.integrated) return kNotSupported;
  memory->total = device->mig < 0 ? gpu.memory : gpu.migs[device->mig].memory;
  memory->free = device->mig < 0 ? gpu.free : gpu.migs[device->mig].free;
  memory->used = memory->total - memory->free;
  return kSuccess;
}
int nvmlDeviceGetCudaComputeCapability(nvmlDevice_st* device, int* major, int* minor) {
  *major = kGpus[device->gpu].cc_major;
  *minor = kGpus[device->gpu].cc_minor;
  return kSuccess;
}
int nvmlDeviceGetPciInfo_v3(nvmlDevice_st* device, nvmlPciInfo_st* pci) {
  std::memset(pci, 0, sizeof(*pci));
  return CopyText(kGpus[device->gpu].pci_bus_id, pci->busId, sizeof(pci->busId));
}
int nvmlDeviceGetNumGpuCores(nvmlDevice_st* device, unsigned int* cores) {
  if (device->mig >= 0) return kNotSupported;
  *cores = kGpus[device->gpu].cores;
  return kSuccess;
}
int nvmlDeviceGetMigMode(nvmlDevice_st* device, unsigned int* current, unsigned int* pending) {
  const FakeGpu& gpu = kGpus[device->gpu];
  if (gpu.cc_major < 8) return kNotSupported;  // MIG arrived with Ampere
  *current = *pending = static_cast<unsigned int>(gpu.mig_enabled);
  return kSuccess;
}
int nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_st* device, unsigned int* count) {
  *count = kGpus[device->gpu].mig_enabled ? 7 : 0;
  return kSuccess;
}
int nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_st* device, unsigned int index,
                                        nvmlDevice_st** mig) {
  if (static_cast<int>(index) >= kGpus[device->gpu].mig_count) return kNotFound;
  *mig = Handle(device->gpu, static_cast<int>(index));
  return kSuccess;
}
int nvmlDeviceGetAttributes_v2(nvmlDevice_st* device, nvmlDeviceAttributes_st* attributes) {
  if (device->mig < 0) return kNotSupported;  // MIG handles only, as documented
  std::memset(attributes, 0, sizeof(*attributes));
  const FakeMig& mig = kGpus[device->gpu].migs[device->mig];
  attributes->multiprocessorCount = mig.sms;
  attributes->memorySizeMB = mig.memory >> 20;
  return kSuccess;
}
int nvmlDeviceGetGpuInstanceId(nvmlDevice_st* device, unsigned int* id) {
  if (device->mig < 0) return kNotSupported;
  *id = kGpus[device->gpu].migs[device->mig].gpu_instance;
  return kSuccess;
}
int nvmlDeviceGetComputeInstanceId(nvmlDevice_st* device, unsigned int* id) {
  if (device->mig < 0) return kNotSupported;
  *id = kGpus[device->gpu].migs[device->mig].compute_instance;
  return kSuccess;
}

}  // extern "C"
