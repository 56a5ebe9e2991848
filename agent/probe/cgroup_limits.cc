#include "agent/probe/cgroup_limits.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace weightpath::probe {
namespace {

// Both are positive. Rounded up without forming quota + period (which
// overflows int64 for a quota near its maximum), and capped at what a
// uint32 holds rather than wrapped: a quota of 2^32 CPUs must not become 0
// (the caller keeps the lowest of this and the machine's CPUs).
std::optional<uint32_t> WholeCpus(int64_t quota, int64_t period) {
  const int64_t whole = quota / period + (quota % period != 0 ? 1 : 0);
  return static_cast<uint32_t>(
      std::min<int64_t>(whole, std::numeric_limits<uint32_t>::max()));
}

}  // namespace

absl::StatusOr<CgroupMembership> ParseProcSelfCgroup(absl::string_view text) {
  CgroupMembership membership;
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    // The path may itself contain ':', so split into at most three fields.
    const size_t first = line.find(':');
    const size_t second = first == absl::string_view::npos ? first : line.find(':', first + 1);
    if (second == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("/proc/self/cgroup line ", line_number, ": '", line,
                       "' is not 'hierarchy-id:controllers:path'"));
    }
    const absl::string_view hierarchy = line.substr(0, first);
    const absl::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    if (hierarchy == "0" && controllers.empty()) {
      membership.unified_path = path;
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(controllers, ',', absl::SkipEmpty())) {
      membership.controller_paths[std::string(controller)] = path;
      membership.controller_mounts[std::string(controller)] = std::string(controllers);
    }
  }
  return membership;
}

absl::StatusOr<std::optional<uint32_t>> ParseCpuMax(absl::string_view text) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipWhitespace());
  int64_t quota = 0;
  int64_t period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[1], &period) || period <= 0 ||
      (fields[0] != "max" && (!absl::SimpleAtoi(fields[0], &quota) || quota <= 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu.max: '", absl::StripAsciiWhitespace(text),
        "' is not 'max <period>' or '<quota> <period>' with positive numbers"));
  }
  if (fields[0] == "max") return std::optional<uint32_t>();
  return WholeCpus(quota, period);
}

absl::StatusOr<std::optional<uint32_t>> ParseCfsQuota(absl::string_view quota_text,
                                                      absl::string_view period_text) {
  int64_t quota = 0;
  int64_t period = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(quota_text), &quota) ||
      (quota <= 0 && quota != -1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu.cfs_quota_us: '", absl::StripAsciiWhitespace(quota_text),
        "' is not -1 or a positive number"));
  }
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(period_text), &period) || period <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu.cfs_period_us: '", absl::StripAsciiWhitespace(period_text),
        "' is not a positive number"));
  }
  if (quota == -1) return std::optional<uint32_t>();
  return WholeCpus(quota, period);
}

absl::StatusOr<std::optional<uint64_t>> ParseMemoryLimit(absl::string_view text) {
  const absl::string_view value = absl::StripAsciiWhitespace(text);
  if (value == "max") return std::optional<uint64_t>();
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(value, &bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory limit: '", value, "' is not 'max' or a number of bytes"));
  }
  return std::optional<uint64_t>(bytes);
}

}  // namespace weightpath::probe
