// Pure parsers for the cgroup files that cap what this process may use.
// Containers see the host's /proc/cpuinfo and /proc/meminfo, so without
// these a 2-CPU pod on a 96-core host would be handed a 96-thread build.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace weightpath::probe {

// Where this process sits, from /proc/self/cgroup.
struct CgroupMembership {
  std::optional<std::string> unified_path;  // cgroup v2 ("0::/path")
  // cgroup v1: controller ("cpu", "memory", ...) -> path within its hierarchy.
  std::map<std::string, std::string> controller_paths;
  // cgroup v1: controller -> the mount directory name its hierarchy uses
  // ("cpu,cpuacct" when the two are co-mounted).
  std::map<std::string, std::string> controller_mounts;
};

// Lines are "hierarchy-id:controllers:path". INVALID_ARGUMENT naming the
// line when one does not have three fields.
absl::StatusOr<CgroupMembership> ParseProcSelfCgroup(absl::string_view text);

// cgroup v2 cpu.max: "max 100000" (no limit) or "<quota> <period>".
// Returns the whole CPUs the quota amounts to, rounded up (150000/100000 ->
// 2: a thread pool sized 1 would leave half the quota unused), or nullopt.
absl::StatusOr<std::optional<uint32_t>> ParseCpuMax(absl::string_view text);

// cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us; a quota of -1 is no limit.
absl::StatusOr<std::optional<uint32_t>> ParseCfsQuota(absl::string_view quota_text,
                                                      absl::string_view period_text);

// cgroup v2 memory.max ("max" or bytes) or v1 memory.limit_in_bytes (bytes;
// "unlimited" is a huge number, which the caller's min() with RAM absorbs).
absl::StatusOr<std::optional<uint64_t>> ParseMemoryLimit(absl::string_view text);

}  // namespace weightpath::probe
