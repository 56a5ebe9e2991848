// The hardware probe: turns a device's /proc, /sys and /dev (and its NVIDIA
// driver, if any) into the API's HardwareProfile, the input the weight-path
// rules classify.
//
// Everything outside the filesystem tree that the probe consults is a seam
// in ProbeEnvironment, so the same code describes the live machine or a
// captured tree of another device without this machine leaking in.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/probe/filesystem.h"
#include "agent/probe/nvidia_gpu.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::probe {

// What the kernel answered when asked for the AMX tile state.
struct AmxPermission {
  enum class Answer { kGranted, kRefused };
  Answer answer = Answer::kGranted;
  std::string detail;  // the kernel's reason when refused (strerror text)
};

// Environment variables that replace the probe with a profile file.
inline constexpr char kProfileFileVariable[] = "WEIGHTPATH_HW_PROFILE";
inline constexpr char kSeedProfileFileVariable[] = "VLLM_OMNI_HW_PROFILE";

// The engine's view of the GPUs: which ones it may use and in what order it
// numbers them. The probe applies them to what NVML lists, as the CUDA
// driver would for the engine (see README.md, "Which GPUs").
inline constexpr char kCudaVisibleDevicesVariable[] = "CUDA_VISIBLE_DEVICES";
inline constexpr char kCudaDeviceOrderVariable[] = "CUDA_DEVICE_ORDER";

// The GPU inventory cache's name in the agent's state_dir.
inline constexpr char kGpuInventoryFileName[] = "gpu-inventory";

struct ProbeEnvironment {
  // Required. /proc, /sys, /dev and /etc of the probed system.
  const Filesystem* filesystem = nullptr;

  // uname's machine field. Unset: inferred from cpuinfo (x86 "flags" ->
  // x86_64, "CPU architecture: 8" -> aarch64).
  std::optional<std::string> kernel_arch;

  // NVIDIA driver libraries to dlopen. Empty: not consulted.
  GpuLibraryNames gpu_libraries;

  // Where the last full GPU inventory is kept, with the fingerprint it was
  // taken under (gpu_inventory.h). Empty: the driver is asked every time.
  std::string gpu_inventory_cache;

  // Asks the kernel for the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM).
  // Unset: not asked; the cpuinfo flags are kept and a probe note says they
  // were not confirmed. Only a live probe can ask: the answer is about the
  // kernel this process runs on, not about a captured tree's.
  std::function<AmxPermission()> request_amx_permission;

  // CPUs this process may run on (sched_getaffinity). Unset: not consulted.
  std::function<std::optional<uint32_t>()> allowed_cpu_count;

  // WEIGHTPATH_HW_PROFILE / VLLM_OMNI_HW_PROFILE, when set and non-empty:
  // the profile is read from that JSON file (on the real filesystem: it is
  // an operator's path, not part of the probed tree) instead of probed.
  // CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER: the engine's, applied to the
  // GPUs the driver lists (absent: every GPU visible, fastest first).
  std::map<std::string, std::string> environment_variables;
};

// The live answers behind LiveProbeEnvironment's seams, exposed so tests can
// check them against this machine's kernel.
AmxPermission RequestAmxPermissionFromKernel();
std::optional<uint32_t> AllowedCpuCountFromKernel();

// This machine: root "/" (or `root`), uname, libnvidia-ml.so.1/libcuda.so.1,
// the AMX request, sched_getaffinity and the process's environment. For a
// root other than "/" only the environment variables are taken from the
// live machine; the rest would describe this machine, not the tree.
// `state_dir` (the agent's): where the GPU inventory is cached, for a probe
// of "/" only; empty: not cached.
ProbeEnvironment LiveProbeEnvironment(const Filesystem& filesystem,
                                      const std::string& state_dir = "");

// A captured tree: nothing of this machine is consulted (no uname, driver
// libraries, AMX request, affinity or environment variables). Tests set the
// seams they need on the result.
ProbeEnvironment TreeProbeEnvironment(const Filesystem& filesystem);

// The profile, `source` = "probe" (or "file:<path>" when a profile file
// replaced it). Unreadable or malformed /proc and /sys files never fail the
// probe: each is one line in probe_notes. Errors: INVALID_ARGUMENT when
// `filesystem` is missing; NOT_FOUND when the root does not exist; for a
// profile file, NOT_FOUND / PERMISSION_DENIED when it cannot be read and
// INVALID_ARGUMENT when it is not a regular file of at most 1 MiB (a FIFO
// or /dev/zero is refused without blocking or reading it) or not a
// HardwareProfile JSON, all naming the variable and the path.
absl::StatusOr<v1::HardwareProfile> ProbeHardware(const ProbeEnvironment& environment);

}  // namespace weightpath::probe
