// NVIDIA GPUs as the driver's own libraries describe them, loaded with
// dlopen at run time: no CUDA toolkit or header is needed to build the agent,
// and a machine without the driver simply has no NVIDIA GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weightpath::probe {

// What is read from a driver is bounded: a broken or hostile library must
// not make the probe allocate or report without limit.
inline constexpr uint32_t kMaxNvidiaGpus = 64;         // NVML's own limit is lower
inline constexpr uint32_t kMaxMigInstancesPerGpu = 8;  // 7 on every MIG GPU so far

// One MIG slice: a device of its own size.
struct NvidiaMigInstance {
  std::string uuid;     // MIG-<uuid>
  std::string profile;  // 3g.40gb, from the driver's name for the slice
  uint64_t memory_total_bytes = 0;
  std::optional<uint64_t> memory_free_bytes;
  uint32_t sm_count = 0;
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
};

struct NvidiaGpu {
  uint32_t index = 0;  // the driver's index: NVML's (PCI order) or CUDA's ordinal
  std::string uuid;    // GPU-<uuid>; empty when the driver did not say
  std::string name;
  uint64_t memory_bytes = 0;  // total
  std::optional<uint64_t> memory_free_bytes;
  uint32_t capability_major = 0;
  uint32_t capability_minor = 0;
  uint32_t sm_count = 0;     // 0 when unknown
  bool integrated = false;   // shares system RAM (Jetson, GB10-class)
  std::string pci_bus_id;
  bool mig_enabled = false;
  std::vector<NvidiaMigInstance> mig_instances;
  std::string library;       // which library answered
};

// Library names or paths to try, in order. Empty lists mean "do not look":
// a captured tree of another device must not be described by this
// machine's driver.
struct GpuLibraryNames {
  std::vector<std::string> nvml;  // live: libnvidia-ml.so.1
  std::vector<std::string> cuda;  // live: libcuda.so.1
};

struct NvidiaQuery {
  std::vector<NvidiaGpu> gpus;
  std::string driver_version;       // 580.95.05
  std::string cuda_driver_version;  // 13.0
  std::string source;               // nvml | cuda; empty when nothing answered
  // True when the CUDA driver listed the GPUs: it applied the process's own
  // CUDA_VISIBLE_DEVICES, so it listed only what an engine started with that
  // environment sees (and nothing about the hidden ones).
  bool visibility_applied_by_driver = false;
  // cuInit answered CUDA_ERROR_NO_DEVICE (100): with CUDA_VISIBLE_DEVICES
  // set, the environment hides every GPU.
  bool cuda_saw_no_device = false;
  // False when the library listed a GPU it could not describe: the list is
  // short, so the other library is asked.
  bool complete = true;
  // A library that loaded but failed (driver not running, symbol missing):
  // worth a probe note, never an error.
  std::vector<std::string> notes;
};

// NVML answers first: it needs no CUDA context, so it costs tens of
// milliseconds where cuInit costs hundreds (seconds without persistence
// mode). The CUDA driver is asked only when NVML is missing (Jetson), fails,
// lists no GPU, or cannot describe one (GB10-class NVML reports no memory).
NvidiaQuery QueryNvidiaGpus(const GpuLibraryNames& libraries);

// The two halves, exposed for tests.
NvidiaQuery QueryWithCuda(const std::vector<std::string>& names);
NvidiaQuery QueryWithNvml(const std::vector<std::string>& names);

// SMs from NVML's CUDA core count and the cores per SM of the capability
// (NVML does not report SMs for a whole GPU); 0 when the capability is one
// this table does not know.
uint32_t SmCountFromCudaCores(uint32_t cores, uint32_t capability_major, uint32_t capability_minor);

// "13.0" for the 13000 that cuDriverGetVersion / NVML report.
std::string CudaVersionText(int version);

// The slice profile in a MIG device's name: "NVIDIA A100-SXM4-80GB MIG
// 3g.40gb" -> "3g.40gb"; empty when the name has none.
std::string MigProfileFromName(const std::string& name);

}  // namespace weightpath::probe
