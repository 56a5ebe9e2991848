#include "agent/probe/cpu_model_name.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/probe/arm_core_names.h"

namespace weightpath::probe {
namespace {

std::string ArmCoreSummary(const CpuInfo& cpuinfo) {
  std::vector<std::pair<std::string, int>> counts;  // cpuinfo order
  for (const CpuInfoProcessor& processor : cpuinfo.processors) {
    if (!processor.arm_implementer || !processor.arm_part) continue;
    std::string name = ArmCoreNameOrIds(*processor.arm_implementer, *processor.arm_part);
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& entry) { return entry.first == name; });
    if (it == counts.end()) {
      counts.emplace_back(std::move(name), 1);
    } else {
      ++it->second;
    }
  }
  if (counts.size() == 1) return counts.front().first;
  std::vector<std::string> parts;
  for (const auto& [name, count] : counts) parts.push_back(absl::StrCat(count, "x ", name));
  return absl::StrJoin(parts, " + ");
}

}  // namespace

std::string CpuModelName(const CpuInfo& cpuinfo, absl::string_view device_tree_model) {
  const std::string& first_model_name =
      cpuinfo.processors.empty() ? std::string() : cpuinfo.processors.front().model_name;
  if (!cpuinfo.flags_are_arm) return first_model_name;

  std::string cores = ArmCoreSummary(cpuinfo);
  if (cores.empty()) cores = first_model_name;
  const std::string board =
      device_tree_model.empty() ? cpuinfo.board_model : std::string(device_tree_model);
  if (board.empty()) return cores;
  if (cores.empty()) return board;
  return absl::StrCat(board, " (", cores, ")");
}

}  // namespace weightpath::probe
