// The NVIDIA inventory a probe works from: asked of the driver, or, when a
// cheap fingerprint of what the driver exposes without being initialised
// is unchanged since the last full probe, read back from the file that
// probe left. Asking NVML costs tens of milliseconds and cuInit hundreds
// (seconds without persistence mode); a boot has 100 ms for everything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/probe/nvidia_gpu.h"
#include "agent/probe/probe.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::probe {

// The cache file is read at most this long: far above 64 GPUs with 8 MIG
// slices each, far below what hurts a small device.
inline constexpr size_t kMaxGpuInventoryFileBytes = 256 * 1024;

struct NvidiaInventory {
  NvidiaQuery query;
  bool from_cache = false;
  int64_t probed_unix_seconds = 0;  // when the driver was asked; 0: never
};

// What changes when the GPUs, the driver or their partitioning change,
// read without loading the driver: /proc/driver/nvidia/version, the NVIDIA
// PCI functions in sysfs (address, device id, class), the names under
// /proc/driver/nvidia/capabilities (one entry per MIG GPU and compute
// instance), /etc/nv_tegra_release, and CUDA_VISIBLE_DEVICES and
// CUDA_DEVICE_ORDER. nullopt when none of the NVIDIA markers exists (then
// nothing is cached: without a driver the query is cheap) or the text
// would exceed its bound.
std::optional<std::string> GpuFingerprint(const ProbeEnvironment& environment);

// The inventory for `environment`: from environment.gpu_inventory_cache
// when its fingerprint matches, else from the driver (then saved there when
// it listed every GPU). A cache file that is missing, a symlink, not a
// regular file, over kMaxGpuInventoryFileBytes, of another fingerprint or
// malformed in any way is ignored (a probe note says why, except when
// missing) and the driver asked.
NvidiaInventory ReadNvidiaInventory(const ProbeEnvironment& environment);

// The inventory in a cache file's text, if it is a well-formed file written
// for `fingerprint`: FAILED_PRECONDITION when the fingerprint differs,
// INVALID_ARGUMENT naming what is malformed or out of bounds otherwise.
absl::StatusOr<NvidiaInventory> ParseGpuInventory(absl::string_view text,
                                                  const std::string& fingerprint);

// Conversions between the driver's view and the API's.
v1::GpuDevice ToGpuDevice(const NvidiaGpu& gpu);

}  // namespace weightpath::probe
