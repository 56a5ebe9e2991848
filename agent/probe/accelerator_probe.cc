#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/probe/accelerator_inventory.h"
#include "agent/probe/nvidia_gpu.h"
#include "agent/probe/probe_steps.h"
#include "agent/probe/qualcomm_npu.h"
#include "agent/probe/tegra.h"

namespace weightpath::probe {
namespace {

// bf16 tensor-core support arrived with Ampere (compute capability 8.0).
bool CapabilityHasBf16(const NvidiaGpu& gpu) { return gpu.capability_major >= 8; }

std::string CapabilityText(const NvidiaGpu& gpu) {
  return absl::StrCat(gpu.capability_major, ".", gpu.capability_minor);
}

void SetGpuFields(const NvidiaGpu& gpu, v1::HardwareProfile* profile) {
  profile->set_gpu_name(gpu.name);
  profile->set_gpu_mem_bytes(gpu.memory_bytes);
  profile->set_gpu_sm_count(gpu.sm_count);
  profile->clear_gpu_capability();
  profile->add_gpu_capability(gpu.capability_major);
  profile->add_gpu_capability(gpu.capability_minor);
}

// Jetson, or an integrated NVIDIA GPU the CUDA driver reports (GB10-class):
// the GPU allocates from system RAM, so its memory is the RAM this process
// may use.
void DescribeUnifiedGpu(const std::optional<TegraSoc>& tegra, const NvidiaGpu* cuda_gpu,
                        v1::HardwareProfile* profile) {
  profile->set_accelerator("cuda_unified");
  v1::AcceleratorInfo& info = *profile->add_accelerators();
  info.set_kind("gpu");
  info.set_vendor("nvidia");
  info.set_usable(true);
  if (cuda_gpu != nullptr) {
    SetGpuFields(*cuda_gpu, profile);
    info.set_route(cuda_gpu->library);
  } else {
    profile->set_gpu_name(tegra && !tegra->soc.empty()
                              ? absl::StrCat("NVIDIA ", tegra->soc, " integrated GPU")
                              : "NVIDIA Tegra integrated GPU");
    info.set_route("libcuda.so.1");
  }
  profile->set_gpu_mem_bytes(profile->ram_total_bytes());
  info.set_name(profile->gpu_name());
  if (tegra) {
    // Every Jetson the rules target (Orin) computes in bf16; the rules treat
    // the Tegra markers as enough, as the seed's prober did.
    profile->set_supports_bf16(true);
    info.set_source(tegra->evidence);
    info.set_reason(absl::StrCat("Tegra SoC", tegra->soc.empty() ? "" : " " + tegra->soc,
                                 " (", tegra->evidence,
                                 "): the GPU shares system RAM through CUDA unified memory"));
  } else {
    profile->set_supports_bf16(CapabilityHasBf16(*cuda_gpu));
    info.set_source(cuda_gpu->library);
    info.set_reason(absl::StrCat("the CUDA driver reports an integrated GPU (capability ",
                                 CapabilityText(*cuda_gpu), ") sharing system RAM"));
  }
  profile->set_supports_fp16(true);
}

void DescribeDiscreteGpus(const std::vector<NvidiaGpu>& gpus, v1::HardwareProfile* profile) {
  profile->set_accelerator("cuda_discrete");
  // The profile's gpu_* fields describe the largest GPU: the one a single
  // engine instance would be placed on.
  const NvidiaGpu& largest = *std::max_element(
      gpus.begin(), gpus.end(),
      [](const NvidiaGpu& a, const NvidiaGpu& b) { return a.memory_bytes < b.memory_bytes; });
  SetGpuFields(largest, profile);
  profile->set_supports_bf16(CapabilityHasBf16(largest));
  profile->set_supports_fp16(true);  // every CUDA GPU computes in fp16
  for (const NvidiaGpu& gpu : gpus) {
    v1::AcceleratorInfo& info = *profile->add_accelerators();
    info.set_kind("gpu");
    info.set_vendor("nvidia");
    info.set_name(gpu.name);
    info.set_usable(true);
    info.set_source(gpu.library);
    info.set_route(gpu.library);
    info.set_reason(absl::StrCat("CUDA GPU, compute capability ", CapabilityText(gpu),
                                 CapabilityHasBf16(gpu) ? " (bf16 capable)"
                                                        : " (fp16 only: bf16 needs 8.0)"));
  }
}

}  // namespace

void ProbeAccelerators(const ProbeEnvironment& environment, v1::HardwareProfile* profile) {
  const Filesystem& filesystem = *environment.filesystem;
  profile->set_accelerator("none");

  const std::optional<TegraSoc> tegra = DetectTegra(filesystem);
  const NvidiaQuery nvidia = QueryNvidiaGpus(environment.gpu_libraries);
  for (const std::string& note : nvidia.notes) profile->add_probe_notes(note);
  const NvidiaGpu* integrated = nullptr;
  for (const NvidiaGpu& gpu : nvidia.gpus) {
    if (gpu.integrated) integrated = &gpu;
  }

  if (tegra || integrated != nullptr) {
    DescribeUnifiedGpu(tegra, integrated, profile);
  } else if (!nvidia.gpus.empty()) {
    DescribeDiscreteGpus(nvidia.gpus, profile);
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
