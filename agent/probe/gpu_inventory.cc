#include "agent/probe/gpu_inventory.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/base/atomic_file.h"
#include "agent/base/local_file.h"
#include "agent/probe/sysfs_text.h"
#include "common/control_characters.h"

namespace weightpath::probe {
namespace {

constexpr char kHeader[] = "weightpath-gpu-inventory 1\n";
constexpr size_t kMaxFingerprintBytes = 32 * 1024;
constexpr size_t kMaxMarkerFileBytes = 4096;
constexpr size_t kMaxPciFunctions = 1024;
constexpr size_t kMaxCapabilityNames = 1024;
constexpr size_t kMaxCachedText = 256;

std::optional<std::string> VariableValue(const ProbeEnvironment& environment, const char* name) {
  auto it = environment.environment_variables.find(name);
  if (it == environment.environment_variables.end()) return std::nullopt;
  return it->second;
}

// Names under /proc/driver/nvidia/capabilities, depth first, bounded:
// gpu0/mig/gi1/ci0/access and the like, one per MIG instance.
void ListCapabilities(const Filesystem& filesystem, const std::string& directory, int depth,
                      size_t* budget, std::string* out) {
  if (depth > 5 || *budget == 0) return;
  auto names = filesystem.ListDirectory(directory);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    if (*budget == 0) return;
    --*budget;
    const std::string path = absl::StrCat(directory, "/", name);
    absl::StrAppend(out, path, "\n");
    ListCapabilities(filesystem, path, depth + 1, budget, out);
  }
}

bool Bounded(const std::string& text) { return text.size() <= kMaxCachedText; }

std::optional<NvidiaGpu> FromGpuDevice(const v1::GpuDevice& device) {
  if (!Bounded(device.uuid()) || !Bounded(device.name()) || !Bounded(device.pci_bus_id()) ||
      !Bounded(device.source()) || device.capability_size() != 2 ||
      device.mig_instances_size() > static_cast<int>(kMaxMigInstancesPerGpu) ||
      device.memory_total_bytes() == 0) {
    return std::nullopt;
  }
  NvidiaGpu gpu;
  gpu.index = device.index();
  gpu.uuid = device.uuid();
  gpu.name = device.name();
  gpu.capability_major = device.capability(0);
  gpu.capability_minor = device.capability(1);
  gpu.sm_count = device.sm_count();
  gpu.memory_bytes = device.memory_total_bytes();
  if (device.has_memory_free_bytes()) gpu.memory_free_bytes = device.memory_free_bytes();
  gpu.integrated = device.integrated();
  gpu.pci_bus_id = device.pci_bus_id();
  gpu.mig_enabled = device.mig_enabled();
  gpu.library = device.source();
  for (const v1::MigInstance& cached : device.mig_instances()) {
    if (!Bounded(cached.uuid()) || !Bounded(cached.profile())) return std::nullopt;
    NvidiaMigInstance& instance = gpu.mig_instances.emplace_back();
    instance.uuid = cached.uuid();
    instance.profile = cached.profile();
    instance.memory_total_bytes = cached.memory_total_bytes();
    if (cached.has_memory_free_bytes()) instance.memory_free_bytes = cached.memory_free_bytes();
    instance.sm_count = cached.sm_count();
    instance.gpu_instance_id = cached.gpu_instance_id();
    instance.compute_instance_id = cached.compute_instance_id();
  }
  return gpu;
}

}  // namespace

absl::StatusOr<NvidiaInventory> ParseGpuInventory(absl::string_view text,
                                                  const std::string& fingerprint) {
  if (!absl::ConsumePrefix(&text, kHeader)) return absl::InvalidArgumentError("not a GPU inventory");
  const size_t newline = text.find('\n');
  size_t length = 0;
  if (newline == absl::string_view::npos || newline > 8 ||
      !absl::SimpleAtoi(text.substr(0, newline), &length) || length > kMaxFingerprintBytes ||
      length > text.size() - newline - 1) {
    return absl::InvalidArgumentError("malformed fingerprint length");
  }
  text.remove_prefix(newline + 1);
  if (text.substr(0, length) != fingerprint) {
    return absl::FailedPreconditionError("fingerprint changed");
  }
  text.remove_prefix(length);
  v1::HardwareProfile stored;
  if (!stored.ParseFromArray(text.data(), static_cast<int>(text.size()))) {
    return absl::InvalidArgumentError("the inventory does not parse");
  }
  if (stored.gpus_size() == 0 || stored.gpus_size() > static_cast<int>(kMaxNvidiaGpus) ||
      !Bounded(stored.gpu_driver_version()) || !Bounded(stored.cuda_driver_version()) ||
      (stored.gpu_inventory_source() != "nvml" && stored.gpu_inventory_source() != "cuda")) {
    return absl::InvalidArgumentError("the inventory is out of bounds");
  }
  NvidiaInventory inventory;
  inventory.from_cache = true;
  inventory.probed_unix_seconds = stored.gpus_probed_unix_seconds();
  inventory.query.source = stored.gpu_inventory_source();
  inventory.query.visibility_applied_by_driver = inventory.query.source == "cuda";
  inventory.query.driver_version = stored.gpu_driver_version();
  inventory.query.cuda_driver_version = stored.cuda_driver_version();
  for (const v1::GpuDevice& device : stored.gpus()) {
    std::optional<NvidiaGpu> gpu = FromGpuDevice(device);
    if (!gpu) return absl::InvalidArgumentError("a GPU entry is out of bounds");
    inventory.query.gpus.push_back(std::move(*gpu));
  }
  return inventory;
}

namespace {

std::string CacheText(const NvidiaInventory& inventory, const std::string& fingerprint) {
  v1::HardwareProfile stored;
  stored.set_gpu_inventory_source(inventory.query.source);
  stored.set_gpus_probed_unix_seconds(inventory.probed_unix_seconds);
  stored.set_gpu_driver_version(inventory.query.driver_version);
  stored.set_cuda_driver_version(inventory.query.cuda_driver_version);
  for (const NvidiaGpu& gpu : inventory.query.gpus) *stored.add_gpus() = ToGpuDevice(gpu);
  return absl::StrCat(kHeader, fingerprint.size(), "\n", fingerprint, stored.SerializeAsString());
}

// Written to a new temporary file beside `path` and renamed over it, so a
// reader sees the old file or the new one. Not fsynced: a file lost or torn
// by a power cut fails to parse, and the next boot asks the driver again.
absl::Status WriteCache(const std::string& path, const std::string& text) {
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
  const std::filesystem::path target(path);
  // A probe killed between the temporary file and the rename leaves the
  // temporary for good: nothing else names it.
  agent::RemoveStaleTemporaryFiles(target.parent_path().string(), [&](absl::string_view name) {
    return name == target.filename().string();
  });
  std::string temporary =
      (target.parent_path() / absl::StrCat(".", target.filename().string(), ".tmp.XXXXXX")).string();
  const int fd = mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot create ", temporary, ": ", std::strerror(errno)));
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      close(fd);
      unlink(temporary.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write ", temporary, ": ", std::strerror(error)));
    }
    written += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("cannot rename to ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace

v1::GpuDevice ToGpuDevice(const NvidiaGpu& gpu) {
  v1::GpuDevice device;
  device.set_index(gpu.index);
  device.set_uuid(gpu.uuid);
  device.set_name(gpu.name);
  device.add_capability(gpu.capability_major);
  device.add_capability(gpu.capability_minor);
  device.set_sm_count(gpu.sm_count);
  device.set_memory_total_bytes(gpu.memory_bytes);
  if (gpu.memory_free_bytes) device.set_memory_free_bytes(*gpu.memory_free_bytes);
  device.set_integrated(gpu.integrated);
  device.set_pci_bus_id(gpu.pci_bus_id);
  device.set_mig_enabled(gpu.mig_enabled);
  device.set_source(gpu.library);
  for (const NvidiaMigInstance& instance : gpu.mig_instances) {
    v1::MigInstance& out = *device.add_mig_instances();
    out.set_uuid(instance.uuid);
    out.set_profile(instance.profile);
    out.set_memory_total_bytes(instance.memory_total_bytes);
    if (instance.memory_free_bytes) out.set_memory_free_bytes(*instance.memory_free_bytes);
    out.set_sm_count(instance.sm_count);
    out.set_gpu_instance_id(instance.gpu_instance_id);
    out.set_compute_instance_id(instance.compute_instance_id);
  }
  return device;
}

std::optional<std::string> GpuFingerprint(const ProbeEnvironment& environment) {
  const Filesystem& filesystem = *environment.filesystem;
  std::string text;
  bool nvidia_seen = false;
  for (const char* marker : {"/proc/driver/nvidia/version", "/etc/nv_tegra_release"}) {
    auto content = filesystem.ReadFile(marker);
    if (!content.ok()) continue;
    if (content->size() > kMaxMarkerFileBytes) return std::nullopt;
    nvidia_seen = true;
    absl::StrAppend(&text, marker, "\n", *content, "\n");
  }
  if (auto functions = filesystem.ListDirectory("/sys/bus/pci/devices"); functions.ok()) {
    size_t listed = 0;
    for (const std::string& function : *functions) {
      if (++listed > kMaxPciFunctions) return std::nullopt;
      const std::string directory = absl::StrCat("/sys/bus/pci/devices/", function);
      if (ReadNumber(filesystem, directory + "/vendor") != 0x10de) continue;
      nvidia_seen = true;
      absl::StrAppend(&text, "pci ", function, " ",
                      ReadTrimmed(filesystem, directory + "/device").value_or("?"), " ",
                      ReadTrimmed(filesystem, directory + "/class").value_or("?"), "\n");
    }
  }
  if (!nvidia_seen) return std::nullopt;
  size_t budget = kMaxCapabilityNames;
  ListCapabilities(filesystem, "/proc/driver/nvidia/capabilities", 0, &budget, &text);
  if (budget == 0) return std::nullopt;
  for (const char* variable : {kCudaVisibleDevicesVariable, kCudaDeviceOrderVariable}) {
    const std::optional<std::string> value = VariableValue(environment, variable);
    absl::StrAppend(&text, variable, value ? absl::StrCat("=", *value) : " unset", "\n");
  }
  if (text.size() > kMaxFingerprintBytes) return std::nullopt;
  return text;
}

NvidiaInventory ReadNvidiaInventory(const ProbeEnvironment& environment) {
  const std::string& path = environment.gpu_inventory_cache;
  std::optional<std::string> fingerprint;
  std::string note;
  if (!path.empty()) {
    fingerprint = GpuFingerprint(environment);
    if (fingerprint) {
      absl::StatusOr<std::string> text = agent::ReadLocalFile(
          path, "GPU inventory cache", kMaxGpuInventoryFileBytes, agent::FinalSymlink::kRefuse);
      if (text.ok()) {
        absl::StatusOr<NvidiaInventory> cached = ParseGpuInventory(*text, *fingerprint);
        if (cached.ok()) return std::move(*cached);
        if (!absl::IsFailedPrecondition(cached.status())) {
          note = absl::StrCat("GPU inventory cache ", ControlEscaped(path), " ignored (",
                              cached.status().message(), "): the driver was asked");
        }
      } else if (!absl::IsNotFound(text.status())) {
        note = absl::StrCat(ControlEscaped(text.status().message()), ": the driver was asked");
      }
    }
  }
  NvidiaInventory inventory;
  inventory.query = QueryNvidiaGpus(environment.gpu_libraries);
  inventory.probed_unix_seconds = absl::ToUnixSeconds(absl::Now());
  if (!note.empty()) inventory.query.notes.insert(inventory.query.notes.begin(), note);
  if (fingerprint && !inventory.query.gpus.empty() && inventory.query.complete) {
    if (absl::Status saved = WriteCache(path, CacheText(inventory, *fingerprint)); !saved.ok()) {
      inventory.query.notes.push_back(
          absl::StrCat("GPU inventory not cached: ", ControlEscaped(saved.message())));
    }
  }
  return inventory;
}

}  // namespace weightpath::probe
