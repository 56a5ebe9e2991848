// CUDA_VISIBLE_DEVICES as the CUDA driver reads it, applied to the GPUs NVML
// listed: NVML ignores the variable, and an engine started with it sees only
// what it names. Checked against driver 580 (CUDA 13.0) case by case.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agent/probe/nvidia_gpu.h"

namespace weightpath::probe {

// A device as CUDA enumerates it: a whole GPU, or one MIG instance of a
// MIG-enabled GPU (whose whole is never a CUDA device).
struct CudaDeviceRef {
  size_t gpu = 0;                 // index into the GPU list
  std::optional<size_t> mig;      // index into that GPU's mig_instances
  bool operator==(const CudaDeviceRef& other) const {
    return gpu == other.gpu && mig == other.mig;
  }
};

struct GpuVisibility {
  std::vector<CudaDeviceRef> visible;  // in the engine's ordinal order
  // Non-empty when the driver would refuse to start at all (the same
  // device named twice): every GPU is then unusable for this reason.
  std::string refused;
  std::vector<std::string> notes;
};

// `visible_devices`: the variable's value, nullopt when unset (everything
// visible). Entries are separated by commas, blanks around one ignored:
//   - an index into CUDA's enumeration ("+0", "0abc" and "0x0" read as 0:
//     the driver takes the leading digits);
//   - "GPU-" and a case-insensitive prefix of one GPU's UUID;
//   - "MIG-" and a prefix of one MIG instance's UUID, or of a plain GPU's
//     (the driver accepts that too), or the legacy "MIG-GPU-<uuid>/<gi>/<ci>".
// An empty, unknown, ambiguous or out-of-range entry ends the list: what
// came before it stays visible. The empty string hides every GPU.
// `device_order`: CUDA_DEVICE_ORDER. PCI_BUS_ID enumerates in NVML's order;
// the default, FASTEST_FIRST, is approximated by compute capability then SM
// count (NVML's order among equals), with a note when that reorders GPUs.
GpuVisibility ResolveCudaVisibleDevices(const std::vector<NvidiaGpu>& gpus,
                                        const std::optional<std::string>& visible_devices,
                                        const std::optional<std::string>& device_order);

}  // namespace weightpath::probe
