#include "policy/hardware_class.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/field_violation.h"
#include "policy/absl_view.h"

namespace weightpath::policy {
namespace {

constexpr std::string_view kX86Arch = "x86_64";
constexpr std::string_view kArm64Arch = "aarch64";

}  // namespace

std::string_view HardwareClassName(HardwareClass hardware_class) {
  switch (hardware_class) {
    case HardwareClass::kJetson:
      return "jetson";
    case HardwareClass::kCudaDiscrete:
      return "cuda_discrete";
    case HardwareClass::kArm64Cpu:
      return "arm64_cpu";
    case HardwareClass::kX86Cpu:
      return "x86_cpu";
    case HardwareClass::kNpuPhone:
      return "npu_phone";
  }
  return "unknown";
}

absl::StatusOr<HardwareClass> ParseHardwareClass(std::string_view name) {
  for (HardwareClass candidate : kAllHardwareClasses) {
    if (HardwareClassName(candidate) == name) return candidate;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("hardware_class '", AbslView(name),
                   "' is not one of jetson, cuda_discrete, arm64_cpu, x86_cpu, npu_phone"));
}

absl::StatusOr<HardwareClass> ClassifyHardware(const v1::HardwareProfile& profile) {
  // The accelerator decides first: the CPU beside a GPU or an NPU does not run
  // the model. An accelerator string the rules do not know leaves the CPU in
  // charge, as the seed's classifier did.
  const std::string& accelerator = profile.accelerator();
  if (absl::StartsWith(accelerator, "npu")) return HardwareClass::kNpuPhone;
  if (accelerator == "cuda_unified") return HardwareClass::kJetson;
  if (accelerator == "cuda_discrete") return HardwareClass::kCudaDiscrete;
  if (profile.arch() == kArm64Arch) return HardwareClass::kArm64Cpu;
  if (profile.arch() == kX86Arch) return HardwareClass::kX86Cpu;
  // The seed fell through to x86 here; an x86 kernel build on a CPU we cannot
  // name would fail at engine start on the device, far from the cause.
  return InvalidArgumentForField("profile.arch", absl::StrCat(
      "profile.arch '", profile.arch(),
      "' is neither x86_64 nor aarch64 and profile.accelerator '", accelerator,
      "' names no supported accelerator: no weight path exists for this CPU"));
}

bool HasAmx(const v1::HardwareProfile& profile) {
  if (profile.arch() != kX86Arch) return false;
  for (const std::string& flag : profile.cpu_flags()) {
    if (flag == "amx_tile" || flag == "amx_bf16") return true;
  }
  return false;
}

}  // namespace weightpath::policy
