#include "agent/probe/accelerator_inventory.h"

#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/probe/sysfs_text.h"

namespace weightpath::probe {
namespace {

struct KnownNpu {
  uint32_t vendor;
  uint32_t device;
  const char* name;
  const char* driver;  // the upstream kernel driver that serves it
};

constexpr KnownNpu kKnownNpus[] = {
    {0x8086, 0x7d1d, "Intel NPU (Meteor Lake)", "intel_vpu"},
    {0x8086, 0x643e, "Intel NPU (Lunar Lake)", "intel_vpu"},
    {0x8086, 0xad1d, "Intel NPU (Arrow Lake)", "intel_vpu"},
    {0x1022, 0x1502, "AMD XDNA NPU (Phoenix/Hawk Point)", "amdxdna"},
    {0x1022, 0x17f0, "AMD XDNA 2 NPU (Strix)", "amdxdna"},
    {0x17cb, 0xa100, "Qualcomm Cloud AI 100", "qaic"},
    {0x1e60, 0x2864, "Hailo-8", "hailo_pci"},
};

const KnownNpu* FindKnownNpu(uint32_t vendor, uint32_t device) {
  for (const KnownNpu& npu : kKnownNpus) {
    if (npu.vendor == vendor && npu.device == device) return &npu;
  }
  return nullptr;
}

struct PciIdentity {
  uint32_t vendor = 0;
  uint32_t device = 0;
};

std::optional<PciIdentity> ReadPciIdentity(const Filesystem& filesystem, absl::string_view dir) {
  auto vendor = ReadNumber(filesystem, absl::StrCat(dir, "/vendor"));
  auto device = ReadNumber(filesystem, absl::StrCat(dir, "/device"));
  if (!vendor || !device) return std::nullopt;
  return PciIdentity{static_cast<uint32_t>(*vendor), static_cast<uint32_t>(*device)};
}

std::string DeviceName(const PciIdentity& pci, absl::string_view kind) {
  if (const KnownNpu* npu = FindKnownNpu(pci.vendor, pci.device)) return npu->name;
  return absl::StrFormat("%s %s (PCI %04x:%04x)", PciVendorName(pci.vendor), kind, pci.vendor,
                         pci.device);
}

// The PCI address a class device (drm, accel) sits on: its `device` link
// ends in the address ("../../../0000:00:0b.0").
std::optional<std::string> PciAddress(const Filesystem& filesystem, absl::string_view class_dir) {
  auto target = filesystem.ReadSymlink(absl::StrCat(class_dir, "/device"));
  if (!target.ok()) return std::nullopt;
  return std::string(PathBasename(*target));
}

std::vector<std::string> ListOrEmpty(const Filesystem& filesystem, absl::string_view dir) {
  auto names = filesystem.ListDirectory(dir);
  return names.ok() ? *names : std::vector<std::string>();
}

void AddRenderNodes(const Filesystem& filesystem, const InventoryOptions& options,
                    std::vector<v1::AcceleratorInfo>* out) {
  for (const std::string& node : ListOrEmpty(filesystem, "/dev/dri")) {
    if (!IsNumberedEntry(node, "renderD")) continue;
    const std::string device_dir = absl::StrCat("/sys/class/drm/", node, "/device");
    const auto pci = ReadPciIdentity(filesystem, device_dir);
    const auto driver = BoundDriver(filesystem, device_dir);
    const bool nvidia = pci && pci->vendor == 0x10de;
    if (nvidia && options.nvidia_gpus_described) continue;

    v1::AcceleratorInfo& info = out->emplace_back();
    info.set_kind("gpu");
    info.set_vendor(pci ? PciVendorName(pci->vendor) : "unknown");
    info.set_name(pci ? DeviceName(*pci, "GPU") : absl::StrCat("GPU behind /dev/dri/", node));
    info.set_source(absl::StrCat("/dev/dri/", node));
    info.set_route(absl::StrCat("/dev/dri/", node));
    if (driver) info.set_driver(*driver);
    if (nvidia) {
      info.set_usable(false);
      info.set_reason(
          "NVIDIA render node present, but neither the CUDA driver nor NVML described a GPU");
    } else if (driver) {
      info.set_usable(true);
      info.set_reason(absl::StrCat("render node served by the ", *driver, " driver"));
    } else {
      info.set_usable(false);
      info.set_reason(absl::StrCat("no kernel driver bound to the device behind /dev/dri/", node));
    }
  }
}

void AddAccelNodes(const Filesystem& filesystem, std::set<std::string>* reported_pci,
                   std::vector<v1::AcceleratorInfo>* out) {
  for (const std::string& node : ListOrEmpty(filesystem, "/dev/accel")) {
    if (!IsNumberedEntry(node, "accel")) continue;
    const std::string class_dir = absl::StrCat("/sys/class/accel/", node);
    const std::string device_dir = absl::StrCat(class_dir, "/device");
    const auto pci = ReadPciIdentity(filesystem, device_dir);
    const auto driver = BoundDriver(filesystem, device_dir);
    if (auto address = PciAddress(filesystem, class_dir)) reported_pci->insert(*address);

    v1::AcceleratorInfo& info = out->emplace_back();
    info.set_kind("npu");
    info.set_vendor(pci ? PciVendorName(pci->vendor) : "unknown");
    info.set_name(pci ? DeviceName(*pci, "accelerator")
                      : absl::StrCat("accelerator behind /dev/accel/", node));
    info.set_source(absl::StrCat("/dev/accel/", node));
    info.set_route(absl::StrCat("/dev/accel/", node));
    if (driver) info.set_driver(*driver);
    info.set_usable(driver.has_value());
    info.set_reason(driver ? absl::StrCat("compute accelerator node served by the ", *driver,
                                          " driver")
                           : absl::StrCat("no kernel driver bound to /dev/accel/", node));
  }
}

void AddUnlistedPciNpus(const Filesystem& filesystem, const std::set<std::string>& reported_pci,
                        std::vector<v1::AcceleratorInfo>* out) {
  for (const std::string& address : ListOrEmpty(filesystem, "/sys/bus/pci/devices")) {
    if (reported_pci.count(address)) continue;
    const std::string device_dir = absl::StrCat("/sys/bus/pci/devices/", address);
    const auto pci = ReadPciIdentity(filesystem, device_dir);
    if (!pci) continue;
    const KnownNpu* npu = FindKnownNpu(pci->vendor, pci->device);
    if (npu == nullptr) continue;
    const auto driver = BoundDriver(filesystem, device_dir);

    v1::AcceleratorInfo& info = out->emplace_back();
    info.set_kind("npu");
    info.set_vendor(PciVendorName(pci->vendor));
    info.set_name(npu->name);
    info.set_source(device_dir);
    if (driver) {
      info.set_driver(*driver);
      info.set_usable(true);
      info.set_route(device_dir);
      info.set_reason(absl::StrCat("PCI device ", address, " bound to the ", *driver, " driver"));
    } else {
      info.set_usable(false);
      info.set_reason(absl::StrCat("PCI device ", address, " has no kernel driver bound (",
                                   npu->driver, " serves it)"));
    }
  }
}

}  // namespace

std::vector<v1::AcceleratorInfo> InventoryAccelerators(const Filesystem& filesystem,
                                                       const InventoryOptions& options) {
  std::vector<v1::AcceleratorInfo> accelerators;
  std::set<std::string> reported_pci;
  AddRenderNodes(filesystem, options, &accelerators);
  AddAccelNodes(filesystem, &reported_pci, &accelerators);
  AddUnlistedPciNpus(filesystem, reported_pci, &accelerators);
  return accelerators;
}

}  // namespace weightpath::probe
