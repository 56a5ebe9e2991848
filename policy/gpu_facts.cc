#include "policy/gpu_facts.h"

#include <algorithm>
#include <string>

namespace weightpath::policy {
namespace {

// One device as the engine would see it; points into the profile.
struct Device {
  const v1::GpuDevice* gpu = nullptr;
  const v1::MigInstance* mig = nullptr;  // null for a whole GPU
  uint64_t total = 0;
  bool free_known = false;
  uint64_t free = 0;
};

uint64_t ClampBytes(uint64_t bytes) { return std::min(bytes, kMaxGpuFactBytes); }

uint32_t CapabilityTenths(const google::protobuf::RepeatedField<uint32_t>& capability) {
  if (capability.empty()) return 0;
  const uint32_t major = std::min(capability[0], kMaxCapabilityMajor);
  const uint32_t minor = capability.size() > 1 ? std::min<uint32_t>(capability[1], 9) : 0;
  return major * 10 + minor;
}

// Calls `visit` with each usable device, in the driver's order, within the
// bounds of gpu_facts.h.
template <typename Visit>
void ForEachUsableDevice(const v1::HardwareProfile& profile, Visit visit) {
  const int gpus = std::min(profile.gpus_size(), kMaxGpuFactDevices);
  for (int i = 0; i < gpus; ++i) {
    const v1::GpuDevice& gpu = profile.gpus(i);
    if (gpu.mig_enabled()) {
      const int instances = std::min(gpu.mig_instances_size(), kMaxGpuFactMigInstances);
      for (int m = 0; m < instances; ++m) {
        const v1::MigInstance& instance = gpu.mig_instances(m);
        if (!instance.usable()) continue;
        Device device;
        device.gpu = &gpu;
        device.mig = &instance;
        device.total = ClampBytes(instance.memory_total_bytes());
        device.free_known = instance.has_memory_free_bytes();
        device.free = ClampBytes(instance.memory_free_bytes());
        visit(device);
      }
      continue;
    }
    if (!gpu.usable()) continue;
    Device device;
    device.gpu = &gpu;
    device.total = ClampBytes(gpu.memory_total_bytes());
    device.free_known = gpu.has_memory_free_bytes();
    device.free = ClampBytes(gpu.memory_free_bytes());
    visit(device);
  }
}

// Same model, same slice shape, same memory: devices tensor parallelism can
// shard evenly across.
bool Identical(const Device& a, const Device& b) {
  if ((a.mig == nullptr) != (b.mig == nullptr) || a.total != b.total) return false;
  if (a.gpu->name() != b.gpu->name()) return false;
  if (CapabilityTenths(a.gpu->capability()) != CapabilityTenths(b.gpu->capability())) {
    return false;
  }
  return a.mig == nullptr || a.mig->profile() == b.mig->profile();
}

}  // namespace

GpuFacts GpuFactsOf(const v1::HardwareProfile& profile) {
  GpuFacts facts;
  facts.l4t_major = std::min(profile.l4t_major(), kMaxL4tMajor);
  if (profile.gpus_size() == 0) {
    // An older probe: one device, the gpu_* fields, free memory unknown.
    const std::string& accelerator = profile.accelerator();
    if (accelerator != "cuda_discrete" && accelerator != "cuda_unified") return facts;
    facts.count = 1;
    facts.identical_count = 1;
    facts.capability_tenths = CapabilityTenths(profile.gpu_capability());
    facts.memory_total_bytes = ClampBytes(profile.gpu_mem_bytes());
    facts.memory_free_bytes = facts.memory_total_bytes;
    facts.integrated = accelerator == "cuda_unified";
    return facts;
  }

  Device primary;
  ForEachUsableDevice(profile, [&](const Device& device) {
    ++facts.count;
    if (primary.gpu == nullptr || device.total > primary.total) primary = device;
  });
  if (primary.gpu == nullptr) return facts;
  facts.capability_tenths = CapabilityTenths(primary.gpu->capability());
  facts.memory_total_bytes = primary.total;
  facts.mig = primary.mig != nullptr;
  facts.integrated = primary.gpu->integrated();
  facts.memory_free_known = true;
  facts.memory_free_bytes = primary.total;
  ForEachUsableDevice(profile, [&](const Device& device) {
    if (!Identical(device, primary)) return;
    ++facts.identical_count;
    if (!device.free_known) {
      facts.memory_free_known = false;
      return;
    }
    facts.memory_free_bytes = std::min(facts.memory_free_bytes, device.free);
  });
  return facts;
}

}  // namespace weightpath::policy
