#include "agent/probe/cpu_topology.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

namespace weightpath::probe {

std::vector<v1::CpuCluster> GroupClustersByMaxFrequency(std::vector<CpuMaxFrequency> cpus) {
  std::map<uint64_t, std::vector<uint32_t>, std::greater<uint64_t>> cpus_by_frequency;
  for (const CpuMaxFrequency& cpu : cpus) cpus_by_frequency[cpu.max_khz].push_back(cpu.cpu);
  std::vector<v1::CpuCluster> clusters;
  for (auto& [max_khz, members] : cpus_by_frequency) {
    std::sort(members.begin(), members.end());
    v1::CpuCluster& cluster = clusters.emplace_back();
    cluster.set_max_khz(max_khz);
    cluster.mutable_cpus()->Add(members.begin(), members.end());
  }
  return clusters;
}

uint32_t CountPhysicalCores(const std::vector<CoreLocation>& locations) {
  std::set<std::pair<uint32_t, uint32_t>> distinct;
  for (const CoreLocation& location : locations) distinct.emplace(location.package, location.core);
  return static_cast<uint32_t>(distinct.size());
}

}  // namespace weightpath::probe
