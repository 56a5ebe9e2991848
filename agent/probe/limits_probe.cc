#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/probe/cgroup_limits.h"
#include "agent/probe/probe_steps.h"

namespace weightpath::probe {
namespace {

// A limit and the file it came from, for the probe note.
template <typename T>
struct Limit {
  T value;
  std::string file;
};

template <typename T>
void KeepLowest(std::optional<Limit<T>>* lowest, T value, std::string file) {
  if (!*lowest || value < (*lowest)->value) *lowest = Limit<T>{value, std::move(file)};
}

// `path` and each ancestor up to the hierarchy root, leaf first: a limit set
// on a parent cgroup binds the children too. Without a cgroup namespace the
// path is the host's, which does not exist under the container's mount, so
// the walk ends at the mount root, which is then the container's own cgroup.
std::vector<std::string> SelfAndAncestors(absl::string_view mount, absl::string_view path) {
  std::vector<std::string> dirs;
  std::string current(path);
  if (!current.empty() && current.front() != '/') current.insert(0, "/");
  while (!current.empty() && current.back() == '/') current.pop_back();
  while (true) {
    dirs.push_back(absl::StrCat(mount, current));
    if (current.empty()) break;
    const size_t parent_end = current.rfind('/');
    current.resize(parent_end == std::string::npos ? 0 : parent_end);
  }
  return dirs;
}

struct CgroupLimits {
  std::optional<Limit<uint32_t>> cpus;
  std::optional<Limit<uint64_t>> memory_bytes;
};

void ReadUnifiedLimits(const Filesystem& filesystem, const std::string& path, CgroupLimits* limits,
                       std::vector<std::string>* notes) {
  for (const std::string& dir : SelfAndAncestors("/sys/fs/cgroup", path)) {
    const std::string cpu_max = dir + "/cpu.max";
    if (auto text = filesystem.ReadFile(cpu_max); text.ok()) {
      auto cpus = ParseCpuMax(*text);
      if (!cpus.ok()) {
        notes->push_back(absl::StrCat("cgroup ", cpu_max, ": ", cpus.status().message()));
      } else if (*cpus) {
        KeepLowest(&limits->cpus, **cpus, cpu_max);
      }
    }
    const std::string memory_max = dir + "/memory.max";
    if (auto text = filesystem.ReadFile(memory_max); text.ok()) {
      auto bytes = ParseMemoryLimit(*text);
      if (!bytes.ok()) {
        notes->push_back(absl::StrCat("cgroup ", memory_max, ": ", bytes.status().message()));
      } else if (*bytes) {
        KeepLowest(&limits->memory_bytes, **bytes, memory_max);
      }
    }
  }
}

void ReadV1Limits(const Filesystem& filesystem, const CgroupMembership& membership,
                  CgroupLimits* limits, std::vector<std::string>* notes) {
  if (auto cpu = membership.controller_paths.find("cpu"); cpu != membership.controller_paths.end()) {
    // Distributions mount the cpu controller as "cpu,cpuacct" or as "cpu".
    for (const std::string& mount : {absl::StrCat("/sys/fs/cgroup/",
                                                  membership.controller_mounts.at("cpu")),
                                     std::string("/sys/fs/cgroup/cpu")}) {
      for (const std::string& dir : SelfAndAncestors(mount, cpu->second)) {
        const std::string quota_file = dir + "/cpu.cfs_quota_us";
        auto quota = filesystem.ReadFile(quota_file);
        auto period = filesystem.ReadFile(dir + "/cpu.cfs_period_us");
        if (!quota.ok() || !period.ok()) continue;
        auto cpus = ParseCfsQuota(*quota, *period);
        if (!cpus.ok()) {
          notes->push_back(absl::StrCat("cgroup ", quota_file, ": ", cpus.status().message()));
        } else if (*cpus) {
          KeepLowest(&limits->cpus, **cpus, quota_file);
        }
      }
    }
  }
  if (auto memory = membership.controller_paths.find("memory");
      memory != membership.controller_paths.end()) {
    for (const std::string& dir : SelfAndAncestors("/sys/fs/cgroup/memory", memory->second)) {
      const std::string limit_file = dir + "/memory.limit_in_bytes";
      auto text = filesystem.ReadFile(limit_file);
      if (!text.ok()) continue;
      auto bytes = ParseMemoryLimit(*text);
      if (!bytes.ok()) {
        notes->push_back(absl::StrCat("cgroup ", limit_file, ": ", bytes.status().message()));
      } else if (*bytes) {
        KeepLowest(&limits->memory_bytes, **bytes, limit_file);
      }
    }
  }
}

void LowerCpus(uint32_t allowed, const std::string& why, v1::HardwareProfile* profile) {
  if (allowed == 0 || allowed >= profile->n_logical()) return;
  profile->add_probe_notes(absl::StrCat("n_logical: ", why, " allows ", allowed, " of ",
                                        profile->n_logical(), " logical CPUs"));
  profile->set_n_logical(allowed);
  profile->set_n_physical(std::min(profile->n_physical(), allowed));
}

}  // namespace

void ApplyResourceLimits(const ProbeEnvironment& environment, v1::HardwareProfile* profile) {
  const Filesystem& filesystem = *environment.filesystem;
  if (environment.allowed_cpu_count) {
    if (const auto allowed = environment.allowed_cpu_count()) {
      LowerCpus(*allowed, "the CPU affinity mask", profile);
    }
  }

  auto membership_text = filesystem.ReadFile("/proc/self/cgroup");
  if (!membership_text.ok()) return;  // no cgroups: nothing caps this process
  auto membership = ParseProcSelfCgroup(*membership_text);
  if (!membership.ok()) {
    profile->add_probe_notes(absl::StrCat("cgroup: ", membership.status().message()));
    return;
  }
  CgroupLimits limits;
  std::vector<std::string> notes;
  if (membership->unified_path) ReadUnifiedLimits(filesystem, *membership->unified_path, &limits, &notes);
  ReadV1Limits(filesystem, *membership, &limits, &notes);
  for (std::string& note : notes) profile->add_probe_notes(std::move(note));

  if (limits.cpus) LowerCpus(limits.cpus->value, absl::StrCat("the quota in ", limits.cpus->file), profile);
  if (limits.memory_bytes && limits.memory_bytes->value < profile->ram_total_bytes()) {
    const uint64_t limit = limits.memory_bytes->value;
    profile->add_probe_notes(absl::StrCat("ram_total_bytes: ", limits.memory_bytes->file,
                                          " allows ", limit, " of ", profile->ram_total_bytes(),
                                          " bytes"));
    profile->set_ram_total_bytes(limit);
    profile->set_ram_available_bytes(std::min(profile->ram_available_bytes(), limit));
  }
}

}  // namespace weightpath::probe
