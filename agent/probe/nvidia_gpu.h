// NVIDIA GPUs as the driver's own libraries describe them, loaded with
// dlopen at run time: no CUDA toolkit or header is needed to build the agent,
// and a machine without the driver simply has no NVIDIA GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weightpath::probe {

struct NvidiaGpu {
  std::string name;
  uint64_t memory_bytes = 0;
  uint32_t capability_major = 0;
  uint32_t capability_minor = 0;
  uint32_t sm_count = 0;     // 0 when only NVML answered (it does not say)
  bool integrated = false;   // shares system RAM (Jetson, GB10-class)
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
  // A library that loaded but failed (driver not running, symbol missing):
  // worth a probe note, never an error.
  std::vector<std::string> notes;
};

// The CUDA driver answers first because only it knows SM counts and whether
// a GPU is integrated; NVML is the fallback (it exists without libcuda on
// some driver installs, and does not work on Jetson at all).
NvidiaQuery QueryNvidiaGpus(const GpuLibraryNames& libraries);

// The two halves, exposed for tests.
NvidiaQuery QueryWithCuda(const std::vector<std::string>& names);
NvidiaQuery QueryWithNvml(const std::vector<std::string>& names);

}  // namespace weightpath::probe
