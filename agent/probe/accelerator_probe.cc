#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/probe/accelerator_inventory.h"
#include "agent/probe/gpu_inventory.h"
#include "agent/probe/gpu_visibility.h"
#include "agent/probe/nvidia_gpu.h"
#include "agent/probe/probe_steps.h"
#include "agent/probe/qualcomm_npu.h"
#include "agent/probe/tegra.h"
#include "common/control_characters.h"

namespace weightpath::probe {
namespace {

// A device as an engine sees it: a whole GPU or one MIG slice, with the
// slice's own memory and SMs.
struct EngineDevice {
  std::string name;
  uint64_t memory_bytes = 0;
  uint32_t capability_major = 0;
  uint32_t capability_minor = 0;
  uint32_t sm_count = 0;
  bool integrated = false;
  std::string library;
  bool usable = false;
  std::string reason;
};

// Servers accept at most 64 accelerators a profile (NPUs and DRM devices
// come after the GPUs); every GPU and slice is in profile.gpus anyway.
constexpr size_t kMaxGpuAccelerators = 32;

// bf16 tensor-core support arrived with Ampere (compute capability 8.0).
bool CapabilityHasBf16(uint32_t major) { return major >= 8; }

std::string CapabilityText(uint32_t major, uint32_t minor) { return absl::StrCat(major, ".", minor); }

void SetGpuFields(const EngineDevice& device, v1::HardwareProfile* profile) {
  profile->set_gpu_name(device.name);
  profile->set_gpu_mem_bytes(device.memory_bytes);
  profile->set_gpu_sm_count(device.sm_count);
  profile->clear_gpu_capability();
  profile->add_gpu_capability(device.capability_major);
  profile->add_gpu_capability(device.capability_minor);
}

std::optional<std::string> Variable(const ProbeEnvironment& environment, const char* name) {
  auto it = environment.environment_variables.find(name);
  if (it == environment.environment_variables.end()) return std::nullopt;
  return it->second;
}

std::string HiddenReason(const std::optional<std::string>& visible_devices) {
  return absl::StrCat("hidden by CUDA_VISIBLE_DEVICES='",
                      ControlEscaped(visible_devices.value_or("").substr(0, 80)),
                      "': an engine started with it does not see this device");
}

// Fills profile->gpus and returns every device an engine could be given,
// usable or not, in the engine's order for the usable ones.
std::vector<EngineDevice> ApplyVisibility(const ProbeEnvironment& environment,
                                          const NvidiaQuery& query, v1::HardwareProfile* profile) {
  const std::optional<std::string> visible_devices =
      Variable(environment, kCudaVisibleDevicesVariable);
  std::vector<EngineDevice> devices;
  for (const NvidiaGpu& gpu : query.gpus) *profile->add_gpus() = ToGpuDevice(gpu);
  auto whole = [&](size_t i) {
    const NvidiaGpu& gpu = query.gpus[i];
    return EngineDevice{gpu.name, gpu.memory_bytes, gpu.capability_major, gpu.capability_minor,
                        gpu.sm_count, gpu.integrated, gpu.library, false, ""};
  };
  auto slice = [&](size_t i, size_t m) {
    const NvidiaGpu& gpu = query.gpus[i];
    const NvidiaMigInstance& instance = gpu.mig_instances[m];
    return EngineDevice{absl::StrCat(gpu.name, " MIG ", instance.profile),
                        instance.memory_total_bytes, gpu.capability_major, gpu.capability_minor,
                        instance.sm_count, false, gpu.library, false, ""};
  };

  if (query.visibility_applied_by_driver) {
    // The CUDA driver listed only what this process's environment shows.
    for (size_t i = 0; i < query.gpus.size(); ++i) {
      v1::GpuDevice& gpu = *profile->mutable_gpus(static_cast<int>(i));
      gpu.set_usable(true);
      gpu.set_cuda_ordinal(static_cast<uint32_t>(i));
      gpu.set_reason("listed by the CUDA driver, which applied CUDA_VISIBLE_DEVICES itself");
      EngineDevice device = whole(i);
      device.usable = true;
      device.reason = gpu.reason();
      devices.push_back(std::move(device));
    }
    return devices;
  }

  const GpuVisibility visibility = ResolveCudaVisibleDevices(
      query.gpus, visible_devices, Variable(environment, kCudaDeviceOrderVariable));
  for (const std::string& note : visibility.notes) profile->add_probe_notes(note);
  std::vector<CudaDeviceRef> all;
  for (size_t i = 0; i < query.gpus.size(); ++i) {
    const NvidiaGpu& gpu = query.gpus[i];
    if (!gpu.mig_enabled) {
      all.push_back({i, std::nullopt});
      continue;
    }
    for (size_t m = 0; m < gpu.mig_instances.size(); ++m) all.push_back({i, m});
    v1::GpuDevice& parent = *profile->mutable_gpus(static_cast<int>(i));
    parent.set_reason(gpu.mig_instances.empty()
                          ? "MIG is enabled and no MIG instance exists: no engine can use it"
                          : "MIG is enabled: its instances are the devices an engine uses");
    if (gpu.mig_instances.empty()) {
      devices.push_back(whole(i));
      devices.back().reason = parent.reason();
    }
  }
  // Usable devices first, in the engine's order; then the hidden ones.
  for (size_t ordinal = 0; ordinal < visibility.visible.size(); ++ordinal) {
    const CudaDeviceRef& ref = visibility.visible[ordinal];
    v1::GpuDevice& gpu = *profile->mutable_gpus(static_cast<int>(ref.gpu));
    EngineDevice device = ref.mig ? slice(ref.gpu, *ref.mig) : whole(ref.gpu);
    device.usable = true;
    device.reason = absl::StrCat("CUDA device ", ordinal,
                                 visible_devices ? " under CUDA_VISIBLE_DEVICES" : "");
    if (ref.mig) {
      v1::MigInstance& instance = *gpu.mutable_mig_instances(static_cast<int>(*ref.mig));
      instance.set_usable(true);
      instance.set_cuda_ordinal(static_cast<uint32_t>(ordinal));
      instance.set_reason(device.reason);
    } else {
      gpu.set_usable(true);
      gpu.set_cuda_ordinal(static_cast<uint32_t>(ordinal));
      gpu.set_reason(device.reason);
    }
    devices.push_back(std::move(device));
  }
  for (const CudaDeviceRef& ref : all) {
    if (std::find(visibility.visible.begin(), visibility.visible.end(), ref) !=
        visibility.visible.end()) {
      continue;
    }
    EngineDevice device = ref.mig ? slice(ref.gpu, *ref.mig) : whole(ref.gpu);
    device.reason = visibility.refused.empty() ? HiddenReason(visible_devices) : visibility.refused;
    v1::GpuDevice& gpu = *profile->mutable_gpus(static_cast<int>(ref.gpu));
    if (ref.mig) {
      gpu.mutable_mig_instances(static_cast<int>(*ref.mig))->set_reason(device.reason);
    } else {
      gpu.set_reason(device.reason);
    }
    devices.push_back(std::move(device));
  }
  return devices;
}

// Jetson, or an integrated NVIDIA GPU the CUDA driver reports (GB10-class):
// the GPU allocates from system RAM, so its memory is the RAM this process
// may use.
void DescribeUnifiedGpu(const std::optional<TegraSoc>& tegra, const EngineDevice* cuda_gpu,
                        const std::string& hidden, v1::HardwareProfile* profile) {
  v1::AcceleratorInfo& info = *profile->add_accelerators();
  info.set_kind("gpu");
  info.set_vendor("nvidia");
  const std::string name = cuda_gpu != nullptr ? cuda_gpu->name
                           : tegra && !tegra->soc.empty()
                               ? absl::StrCat("NVIDIA ", tegra->soc, " integrated GPU")
                               : "NVIDIA Tegra integrated GPU";
  info.set_name(name);
  info.set_route(cuda_gpu != nullptr ? cuda_gpu->library : "libcuda.so.1");
  info.set_source(tegra ? tegra->evidence : cuda_gpu->library);
  if (!hidden.empty()) {
    info.set_usable(false);
    info.set_reason(hidden);
    return;
  }
  profile->set_accelerator("cuda_unified");
  info.set_usable(true);
  if (cuda_gpu != nullptr) {
    SetGpuFields(*cuda_gpu, profile);
  } else {
    profile->set_gpu_name(name);
  }
  profile->set_gpu_mem_bytes(profile->ram_total_bytes());
  if (tegra) {
    // Every Jetson the rules target (Orin) computes in bf16; the rules treat
    // the Tegra markers as enough, as the seed's prober did.
    profile->set_supports_bf16(true);
    info.set_reason(absl::StrCat("Tegra SoC", tegra->soc.empty() ? "" : " " + tegra->soc,
                                 " (", tegra->evidence,
                                 "): the GPU shares system RAM through CUDA unified memory"));
  } else {
    profile->set_supports_bf16(CapabilityHasBf16(cuda_gpu->capability_major));
    info.set_reason(absl::StrCat("the CUDA driver reports an integrated GPU (capability ",
                                 CapabilityText(cuda_gpu->capability_major,
                                                cuda_gpu->capability_minor),
                                 ") sharing system RAM"));
  }
  profile->set_supports_fp16(true);
}

void DescribeDiscreteGpus(const std::vector<EngineDevice>& devices, v1::HardwareProfile* profile) {
  // The profile's gpu_* fields describe the largest usable device: the one a
  // single engine instance would be placed on. A MIG slice counts with its
  // own memory, never its parent's.
  const EngineDevice* largest = nullptr;
  for (const EngineDevice& device : devices) {
    if (device.usable && (largest == nullptr || device.memory_bytes > largest->memory_bytes)) {
      largest = &device;
    }
  }
  if (largest != nullptr) {
    profile->set_accelerator("cuda_discrete");
    SetGpuFields(*largest, profile);
    profile->set_supports_bf16(CapabilityHasBf16(largest->capability_major));
    profile->set_supports_fp16(true);  // every CUDA GPU computes in fp16
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const EngineDevice& device = devices[i];
    if (i == kMaxGpuAccelerators) {
      profile->add_probe_notes(absl::StrCat(devices.size() - i,
                                            " more GPU devices are listed in gpus only"));
      break;
    }
    v1::AcceleratorInfo& info = *profile->add_accelerators();
    info.set_kind("gpu");
    info.set_vendor("nvidia");
    info.set_name(device.name);
    info.set_usable(device.usable);
    info.set_source(device.library);
    info.set_route(device.library);
    if (!device.usable) {
      info.set_reason(device.reason);
      continue;
    }
    info.set_reason(absl::StrCat(
        "CUDA GPU, compute capability ", CapabilityText(device.capability_major, device.capability_minor),
        CapabilityHasBf16(device.capability_major) ? " (bf16 capable)" : " (fp16 only: bf16 needs 8.0)",
        ", ", device.reason));
  }
}

}  // namespace

void ProbeAccelerators(const ProbeEnvironment& environment, v1::HardwareProfile* profile) {
  const Filesystem& filesystem = *environment.filesystem;
  profile->set_accelerator("none");

  const std::optional<TegraSoc> tegra = DetectTegra(filesystem);
  if (tegra) {
    if (auto text = filesystem.ReadFile("/etc/nv_tegra_release"); text.ok()) {
      if (auto release = ParseL4tRelease(*text)) {
        profile->set_l4t_release(release->text);
        profile->set_l4t_major(release->major);
      }
    }
  }
  const std::optional<std::string> visible_devices =
      Variable(environment, kCudaVisibleDevicesVariable);
  if (visible_devices) profile->set_cuda_visible_devices(visible_devices->substr(0, 256));

  const NvidiaInventory inventory = ReadNvidiaInventory(environment);
  const NvidiaQuery& nvidia = inventory.query;
  for (const std::string& note : nvidia.notes) profile->add_probe_notes(note);
  profile->set_gpu_driver_version(nvidia.driver_version);
  profile->set_cuda_driver_version(nvidia.cuda_driver_version);
  if (!nvidia.source.empty()) {
    profile->set_gpu_inventory_source(inventory.from_cache ? "cache" : nvidia.source);
    profile->set_gpus_probed_unix_seconds(inventory.probed_unix_seconds);
  }
  if (inventory.from_cache) {
    profile->add_probe_notes(absl::StrCat(
        "GPU inventory from the cache of the probe at unix time ", inventory.probed_unix_seconds,
        " (nothing the driver exposes had changed); free memory is as of then"));
  }

  const std::vector<EngineDevice> devices = ApplyVisibility(environment, nvidia, profile);
  const EngineDevice* integrated = nullptr;
  for (const EngineDevice& device : devices) {
    if (device.integrated && device.usable) integrated = &device;
  }

  if (tegra || integrated != nullptr) {
    // A Jetson's one GPU, hidden when CUDA said so or when the variable
    // names nothing of a one-GPU machine.
    std::string hidden;
    if (integrated == nullptr && visible_devices) {
      NvidiaGpu only;
      only.name = "integrated";
      const bool shown =
          !nvidia.cuda_saw_no_device &&
          !ResolveCudaVisibleDevices({only}, visible_devices, std::nullopt).visible.empty();
      if (!shown) hidden = HiddenReason(visible_devices);
    }
    DescribeUnifiedGpu(tegra, integrated, hidden, profile);
  } else if (!devices.empty()) {
    DescribeDiscreteGpus(devices, profile);
  }

  if (auto qualcomm = DetectQualcommNpu(filesystem)) {
    // A phone's NPU decides its class only when no CUDA GPU did.
    if (qualcomm->usable() && profile->accelerator() == "none") {
      profile->set_accelerator("npu:qualcomm");
    }
    *profile->add_accelerators() = std::move(*qualcomm);
  }

  InventoryOptions options;
  options.nvidia_gpus_described = !nvidia.gpus.empty();
  for (v1::AcceleratorInfo& info : InventoryAccelerators(filesystem, options)) {
    *profile->add_accelerators() = std::move(info);
  }
}

}  // namespace weightpath::probe
