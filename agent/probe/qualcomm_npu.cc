#include "agent/probe/qualcomm_npu.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/sysfs_text.h"

namespace weightpath::probe {
namespace {

std::optional<std::string> FindFastRpcNode(const Filesystem& filesystem) {
  auto names = filesystem.ListDirectory("/dev");
  if (!names.ok()) return std::nullopt;
  // The compute DSP (cdsp) is the one that runs NPU work; adsprpc-smd is the
  // downstream kernel's single entry point to it.
  for (const std::string& name : *names) {
    if (absl::StartsWith(name, "fastrpc-cdsp")) return absl::StrCat("/dev/", name);
  }
  for (const std::string& name : *names) {
    if (name == "adsprpc-smd") return absl::StrCat("/dev/", name);
  }
  return std::nullopt;
}

}  // namespace

std::optional<v1::AcceleratorInfo> DetectQualcommNpu(const Filesystem& filesystem) {
  const std::optional<std::string> node = FindFastRpcNode(filesystem);
  if (!node) return std::nullopt;

  const auto family = ReadTrimmed(filesystem, "/sys/devices/soc0/family");
  const auto machine = ReadTrimmed(filesystem, "/sys/devices/soc0/machine");
  const auto soc_id = ReadTrimmed(filesystem, "/sys/devices/soc0/soc_id");
  const bool qualcomm_soc =
      family && absl::StrContains(absl::AsciiStrToLower(*family), "snapdragon");

  v1::AcceleratorInfo info;
  info.set_kind("npu");
  info.set_vendor("qualcomm");
  info.set_source(*node);
  info.set_route(*node);
  info.set_driver("fastrpc");
  if (!qualcomm_soc) {
    info.set_name("Qualcomm Hexagon DSP");
    info.set_usable(false);
    info.set_reason(absl::StrCat("FastRPC node ", *node,
                                 " present, but /sys/devices/soc0/family does not name a "
                                 "Snapdragon SoC"));
    return info;
  }
  const std::string soc = machine ? *machine : *family;
  info.set_name(absl::StrCat("Qualcomm Hexagon NPU (", *family, machine ? " " + *machine : "",
                             soc_id ? absl::StrCat(", soc_id ", *soc_id) : "", ")"));
  info.set_usable(true);
  info.set_reason(absl::StrCat("FastRPC node ", *node, " reaches the Hexagon DSP of ", soc));
  return info;
}

}  // namespace weightpath::probe
