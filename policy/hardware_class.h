// The five classes of device the rules distinguish, derived from a profile.
#pragma once

#include <array>
#include <string_view>

#include "absl/status/statusor.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::policy {

enum class HardwareClass { kJetson, kCudaDiscrete, kArm64Cpu, kX86Cpu, kNpuPhone };

inline constexpr std::array<HardwareClass, 5> kAllHardwareClasses = {
    HardwareClass::kJetson, HardwareClass::kCudaDiscrete, HardwareClass::kArm64Cpu,
    HardwareClass::kX86Cpu, HardwareClass::kNpuPhone};

// "jetson" | "cuda_discrete" | "arm64_cpu" | "x86_cpu" | "npu_phone"
std::string_view HardwareClassName(HardwareClass hardware_class);
absl::StatusOr<HardwareClass> ParseHardwareClass(std::string_view name);

// Accelerator first (npu* -> npu_phone, cuda_unified -> jetson,
// cuda_discrete), then the CPU arch (aarch64 -> arm64_cpu, x86_64 ->
// x86_cpu). Any other arch without an accelerator is INVALID_ARGUMENT naming
// profile.arch: an unknown CPU must never be handed an x86 kernel build.
absl::StatusOr<HardwareClass> ClassifyHardware(const v1::HardwareProfile& profile);

// AMX tiles, which gate vLLM's CPU int4 x int8 GEMM: x86_64 and amx_tile or
// amx_bf16 among the flags.
bool HasAmx(const v1::HardwareProfile& profile);

}  // namespace weightpath::policy
