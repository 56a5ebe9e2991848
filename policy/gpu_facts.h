// What the rules and the engine-argument expressions can see of a profile's
// GPUs: the devices the engine's environment shows (whole GPUs, and MIG
// instances as devices of their own size), reduced to a few numbers.
//
// The engine runs on the "primary" device, the usable one with the most
// memory (the first in the driver's order on a tie), and tensor parallelism
// can span only devices identical to it (same name, capability and memory:
// vLLM shards evenly). A MIG slice is judged by its own memory, never the
// parent's. A profile from an older probe (no `gpus`) with a CUDA
// accelerator is read as one device from its gpu_* fields.
#pragma once

#include <cstdint>

#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::policy {

// At most this many GPUs, and MIG instances per GPU, are read from a
// profile (the server refuses larger lists; the policy is also run on
// profiles no server checked, so it bounds its own work).
inline constexpr int kMaxGpuFactDevices = 64;
inline constexpr int kMaxGpuFactMigInstances = 8;
// Memory figures are clamped here (2^53 bytes, 8 PiB) so that every figure
// is exact as a double.
inline constexpr uint64_t kMaxGpuFactBytes = uint64_t{1} << 53;
// Capability majors above this are read as this (a profile can say anything).
inline constexpr uint32_t kMaxCapabilityMajor = 99;
inline constexpr uint32_t kMaxL4tMajor = 1000;

struct GpuFacts {
  // Usable devices: whole GPUs the engine sees plus usable MIG instances.
  uint32_t count = 0;
  // Usable devices identical to the primary one (0 without a GPU).
  uint32_t identical_count = 0;
  // major * 10 + min(minor, 9) of the primary device (its parent's for a
  // MIG slice); 0 without a GPU. 8.9 is 89, 12.1 is 121.
  uint32_t capability_tenths = 0;
  uint64_t memory_total_bytes = 0;
  // The least free memory among the identical devices; their total where
  // the profile does not say.
  uint64_t memory_free_bytes = 0;
  bool memory_free_known = false;
  bool mig = false;         // the primary device is a MIG instance
  bool integrated = false;  // shares system memory (Jetson)
  uint32_t l4t_major = 0;   // 0 when the profile names no L4T release
};

// Pure and allocation-free; bounded by the limits above.
GpuFacts GpuFactsOf(const v1::HardwareProfile& profile);

}  // namespace weightpath::policy
