#include "agent/probe/gpu_visibility.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/control_characters.h"

namespace weightpath::probe {
namespace {

// CUDA's default enumeration of whole GPUs and MIG instances.
std::vector<CudaDeviceRef> Enumeration(const std::vector<NvidiaGpu>& gpus,
                                       const std::optional<std::string>& device_order,
                                       std::vector<std::string>* notes) {
  std::vector<size_t> order(gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (!(device_order && *device_order == "PCI_BUS_ID")) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const NvidiaGpu& x = gpus[a];
      const NvidiaGpu& y = gpus[b];
      if (x.capability_major != y.capability_major) return x.capability_major > y.capability_major;
      if (x.capability_minor != y.capability_minor) return x.capability_minor > y.capability_minor;
      return x.sm_count > y.sm_count;
    });
    if (!std::is_sorted(order.begin(), order.end())) {
      notes->push_back(
          "GPUs differ, so CUDA's default fastest-first order was estimated from capability "
          "and SM count; set CUDA_DEVICE_ORDER=PCI_BUS_ID for the engine and the agent, or name "
          "GPUs by UUID, for an exact match");
    }
  }
  std::vector<CudaDeviceRef> devices;
  for (size_t gpu : order) {
    if (!gpus[gpu].mig_enabled) {
      devices.push_back({gpu, std::nullopt});
      continue;
    }
    for (size_t mig = 0; mig < gpus[gpu].mig_instances.size(); ++mig) devices.push_back({gpu, mig});
  }
  return devices;
}

bool HasPrefixIgnoringCase(absl::string_view text, absl::string_view prefix) {
  return text.size() >= prefix.size() && absl::EqualsIgnoreCase(text.substr(0, prefix.size()), prefix);
}

// The one device whose UUID (without its "GPU-"/"MIG-") starts with
// `prefix`; nullopt when none or several do.
std::optional<CudaDeviceRef> ByUuidPrefix(const std::vector<NvidiaGpu>& gpus,
                                          absl::string_view prefix, bool whole_gpus,
                                          bool mig_instances) {
  if (prefix.empty()) return std::nullopt;
  std::optional<CudaDeviceRef> found;
  int matches = 0;
  for (size_t gpu = 0; gpu < gpus.size(); ++gpu) {
    absl::string_view uuid = gpus[gpu].uuid;
    if (whole_gpus && absl::ConsumePrefix(&uuid, "GPU-") && HasPrefixIgnoringCase(uuid, prefix)) {
      ++matches;
      found = CudaDeviceRef{gpu, std::nullopt};
    }
    if (!mig_instances) continue;
    for (size_t mig = 0; mig < gpus[gpu].mig_instances.size(); ++mig) {
      absl::string_view mig_uuid = gpus[gpu].mig_instances[mig].uuid;
      if (absl::ConsumePrefix(&mig_uuid, "MIG-") && HasPrefixIgnoringCase(mig_uuid, prefix)) {
        ++matches;
        found = CudaDeviceRef{gpu, mig};
      }
    }
  }
  if (matches != 1) return std::nullopt;
  return found;
}

// "MIG-GPU-<uuid>/<gi>/<ci>", the form drivers before R470 used.
std::optional<CudaDeviceRef> ByLegacyMigName(const std::vector<NvidiaGpu>& gpus,
                                             absl::string_view rest) {
  const std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  uint32_t gi = 0, ci = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &gi) || !absl::SimpleAtoi(parts[2], &ci)) {
    return std::nullopt;
  }
  for (size_t gpu = 0; gpu < gpus.size(); ++gpu) {
    if (!absl::EqualsIgnoreCase(gpus[gpu].uuid, parts[0])) continue;
    for (size_t mig = 0; mig < gpus[gpu].mig_instances.size(); ++mig) {
      const NvidiaMigInstance& instance = gpus[gpu].mig_instances[mig];
      if (instance.gpu_instance_id == gi && instance.compute_instance_id == ci) {
        return CudaDeviceRef{gpu, mig};
      }
    }
  }
  return std::nullopt;
}

// The leading decimal digits after an optional '+', as the driver's
// strtol-like reading takes them; nullopt when there are none.
std::optional<size_t> LeadingIndex(absl::string_view entry) {
  absl::ConsumePrefix(&entry, "+");
  size_t digits = 0;
  while (digits < entry.size() && absl::ascii_isdigit(static_cast<unsigned char>(entry[digits]))) {
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  size_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    value = value * 10 + static_cast<size_t>(entry[i] - '0');
    if (value > (size_t{1} << 20)) return std::nullopt;  // beyond any device count
  }
  return value;
}

std::optional<CudaDeviceRef> Select(const std::vector<NvidiaGpu>& gpus,
                                    const std::vector<CudaDeviceRef>& enumeration,
                                    absl::string_view entry) {
  absl::string_view rest = entry;
  if (absl::ConsumePrefix(&rest, "GPU-")) {
    auto device = ByUuidPrefix(gpus, rest, /*whole_gpus=*/true, /*mig_instances=*/false);
    // A MIG-enabled GPU is not a CUDA device by itself.
    if (device && gpus[device->gpu].mig_enabled) return std::nullopt;
    return device;
  }
  if (absl::ConsumePrefix(&rest, "MIG-")) {
    if (absl::StrContains(rest, '/')) return ByLegacyMigName(gpus, rest);
    auto device = ByUuidPrefix(gpus, rest, /*whole_gpus=*/true, /*mig_instances=*/true);
    if (device && !device->mig && gpus[device->gpu].mig_enabled) return std::nullopt;
    return device;
  }
  const std::optional<size_t> index = LeadingIndex(entry);
  if (!index || *index >= enumeration.size()) return std::nullopt;
  return enumeration[*index];
}

}  // namespace

GpuVisibility ResolveCudaVisibleDevices(const std::vector<NvidiaGpu>& gpus,
                                        const std::optional<std::string>& visible_devices,
                                        const std::optional<std::string>& device_order) {
  GpuVisibility result;
  const std::vector<CudaDeviceRef> enumeration = Enumeration(gpus, device_order, &result.notes);
  if (!visible_devices) {
    result.visible = enumeration;
    return result;
  }
  if (visible_devices->empty()) return result;
  // Each entry either adds a device not yet listed, ends the list, or
  // repeats one (which ends everything), so this loop is bounded by the
  // number of devices, whatever the variable's length.
  for (absl::string_view entry : absl::StrSplit(*visible_devices, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    const std::optional<CudaDeviceRef> device =
        entry.empty() ? std::nullopt : Select(gpus, enumeration, entry);
    if (!device) {
      result.notes.push_back(absl::StrCat(
          "CUDA_VISIBLE_DEVICES entry '", ControlEscaped(entry.substr(0, 80)),
          "' names no device of this machine, so it and the entries after it are ignored, as "
          "the CUDA driver ignores them"));
      break;
    }
    if (std::find(result.visible.begin(), result.visible.end(), *device) != result.visible.end()) {
      result.refused = absl::StrCat(
          "CUDA_VISIBLE_DEVICES names the same device twice ('", ControlEscaped(entry.substr(0, 80)),
          "'): the CUDA driver then fails to initialise (CUDA_ERROR_INVALID_DEVICE)");
      result.visible.clear();
      return result;
    }
    result.visible.push_back(*device);
  }
  return result;
}

}  // namespace weightpath::probe
