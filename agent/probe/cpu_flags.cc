#include "agent/probe/cpu_flags.h"

#include <algorithm>
#include "absl/strings/string_view.h"

#include "absl/strings/match.h"

namespace weightpath::probe {
namespace {

struct FlagRule {
  absl::string_view raw;
  absl::string_view alias;  // empty: the raw name is the normalised one
};

constexpr FlagRule kX86Rules[] = {
    {"avx2", ""},       {"avx512f", "avx512"}, {"avx512_bf16", ""}, {"avx512_vnni", ""},
    {"amx_bf16", ""},   {"amx_tile", ""},      {"amx_int8", ""},    {"fma", ""},
    {"f16c", ""},
};

constexpr FlagRule kArmRules[] = {
    {"asimd", "neon"}, {"asimdhp", "fp16_arith"}, {"asimddp", "dotprod"}, {"i8mm", ""},
    {"bf16", ""},      {"sve", ""},               {"sve2", ""},           {"sme", ""},
};

bool Contains(const std::vector<std::string>& flags, absl::string_view flag) {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

template <size_t N>
std::vector<std::string> Apply(const FlagRule (&rules)[N], const std::vector<std::string>& raw) {
  // Output follows the rule table, not the kernel's order, so two kernels
  // printing the same flags give identical profiles.
  std::vector<std::string> normalised;
  for (const FlagRule& rule : rules) {
    if (!Contains(raw, rule.raw)) continue;
    normalised.emplace_back(rule.raw);
    if (!rule.alias.empty()) normalised.emplace_back(rule.alias);
  }
  return normalised;
}

}  // namespace

std::vector<std::string> NormaliseCpuFlags(const std::vector<std::string>& raw_flags, bool arm) {
  return arm ? Apply(kArmRules, raw_flags) : Apply(kX86Rules, raw_flags);
}

bool CpuFlagsSupportBf16(const std::vector<std::string>& flags) {
  return Contains(flags, "avx512_bf16") || Contains(flags, "amx_bf16") || Contains(flags, "bf16");
}

bool CpuFlagsSupportFp16(const std::vector<std::string>& flags) {
  return Contains(flags, "f16c") || Contains(flags, "fp16_arith");
}

bool DropAmxFlags(std::vector<std::string>* flags) {
  const auto first_amx = std::remove_if(flags->begin(), flags->end(), [](const std::string& flag) {
    return absl::StartsWith(flag, "amx_");
  });
  const bool dropped = first_amx != flags->end();
  flags->erase(first_amx, flags->end());
  return dropped;
}

}  // namespace weightpath::probe
