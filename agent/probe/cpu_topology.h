// Pure functions over per-CPU sysfs facts: big.LITTLE clusters and the
// count of physical cores.
#pragma once

#include <cstdint>
#include <vector>

#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::probe {

struct CpuMaxFrequency {
  uint32_t cpu = 0;
  uint64_t max_khz = 0;  // cpufreq/cpuinfo_max_freq
};

// One cluster per distinct max frequency, fastest first, CPUs ascending.
// Grouping is by value, not by cpufreq policy: phones can put two core types
// under one policy, some servers have one policy per CPU, and a Jetson Orin
// has three policies with the same maximum; what a scheduler-aware engine
// needs is "which CPUs are the fast ones".
std::vector<v1::CpuCluster> GroupClustersByMaxFrequency(std::vector<CpuMaxFrequency> cpus);

struct CoreLocation {
  uint32_t package = 0;  // topology/physical_package_id
  uint32_t core = 0;     // topology/core_id
};

// Distinct (package, core) pairs: SMT siblings share one, while core ids
// restart in each package (and, on many ARM SoCs, in each cluster).
uint32_t CountPhysicalCores(const std::vector<CoreLocation>& locations);

}  // namespace weightpath::probe
