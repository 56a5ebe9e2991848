#include "policy/totality.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "policy/absl_view.h"

namespace weightpath::policy {
namespace {

// Arch bits a profile of `hardware_class` can carry. A CPU class fixes its
// arch; behind an accelerator any arch is possible, including one no rule
// names (bit 0).
std::vector<uint64_t> ArchBitsFor(HardwareClass hardware_class, const CompiledRules& rules) {
  // CompiledRules puts x86_64 at bit 0 and aarch64 at bit 1.
  if (hardware_class == HardwareClass::kX86Cpu) return {uint64_t{1} << 0};
  if (hardware_class == HardwareClass::kArm64Cpu) return {uint64_t{1} << 1};
  std::vector<uint64_t> bits = {0};
  for (size_t i = 0; i < rules.arch_names().size(); ++i) bits.push_back(uint64_t{1} << i);
  return bits;
}

// How often (in profiles) the cancel flag is read.
constexpr uint64_t kCancelCheckProfiles = 1024;

// Multiplies with saturation at kMaxAbstractProfiles + 1.
uint64_t SaturatingProduct(uint64_t a, uint64_t b) {
  constexpr uint64_t kOver = kMaxAbstractProfiles + 1;
  if (a == 0 || b == 0) return 0;
  if (a > kOver / b) return kOver;
  uint64_t product = a * b;
  return product > kOver ? kOver : product;
}

// One value of each GPU fact the rules test, and MIG.
struct GpuCombination {
  std::array<uint64_t, kGpuFactCount> values{};
  bool mig = false;
};

std::vector<GpuCombination> GpuCombinations(const CompiledRules& rules) {
  std::vector<GpuCombination> combinations = {GpuCombination{}};
  for (size_t fact = 0; fact < kGpuFactCount; ++fact) {
    std::vector<GpuCombination> next;
    for (const GpuCombination& combination : combinations) {
      for (uint64_t point : rules.gpu_points()[fact]) {
        GpuCombination extended = combination;
        extended.values[fact] = point;
        next.push_back(extended);
      }
    }
    combinations = std::move(next);
  }
  if (rules.tests_mig()) {
    const size_t count = combinations.size();
    for (size_t i = 0; i < count; ++i) {
      GpuCombination with_mig = combinations[i];
      with_mig.mig = true;
      combinations.push_back(with_mig);
    }
  }
  return combinations;
}

uint64_t GpuCombinationCount(const CompiledRules& rules) {
  uint64_t count = rules.tests_mig() ? 2 : 1;
  for (const std::vector<uint64_t>& points : rules.gpu_points()) {
    count = SaturatingProduct(count, points.size());
  }
  return count;
}

std::string DescribeGpu(const ProfileFacts& facts, const CompiledRules& rules) {
  static constexpr absl::string_view kNames[kGpuFactCount] = {"gpu_count", "gpu_capability",
                                                              "gpu_memory_gib", "l4t_major"};
  std::string text;
  for (size_t fact = 0; fact < kGpuFactCount; ++fact) {
    if (rules.gpu_points()[fact].size() <= 1) continue;
    const uint64_t value = facts.gpu[fact];
    std::string shown = absl::StrCat(value);
    if (fact == static_cast<size_t>(GpuFact::kCapability)) {
      shown = absl::StrCat(value / 10, ".", value % 10);
    } else if (fact == static_cast<size_t>(GpuFact::kMemory)) {
      shown = absl::StrCat(static_cast<double>(value) / 1073741824.0);
    }
    absl::StrAppend(&text, " ", kNames[fact], "=", shown);
  }
  if (rules.tests_mig()) absl::StrAppend(&text, " mig=", facts.mig ? "true" : "false");
  return text;
}

std::string DescribeFacts(const ProfileFacts& facts, const CompiledRules& rules) {
  std::string arch = "<an arch no rule names>";
  for (size_t i = 0; i < rules.arch_names().size(); ++i) {
    if (facts.arch_bit == (uint64_t{1} << i)) arch = rules.arch_names()[i];
  }
  std::vector<std::string> flags;
  for (size_t i = 0; i < rules.flag_names().size(); ++i) {
    if (facts.flags & (uint64_t{1} << i)) flags.push_back(rules.flag_names()[i]);
  }
  std::vector<std::string> labels;
  for (size_t key = 0; key < rules.label_keys().size(); ++key) {
    int16_t value = facts.label_values[key];
    std::string shown = value == kLabelAbsent       ? "<absent>"
                        : value == kLabelOtherValue ? "<another value>"
                                                    : rules.label_values()[key][value];
    labels.push_back(absl::StrCat(rules.label_keys()[key], "=", shown));
  }
  return absl::StrCat("hardware_class=", AbslView(HardwareClassName(facts.hardware_class)), " arch=", arch,
                      " supports_bf16=", facts.supports_bf16 ? "true" : "false",
                      " cpu_flags=[", absl::StrJoin(flags, ","), "] priority=",
                      facts.priority == v1::PRIORITY_FIDELITY ? "fidelity" : "speed",
                      " labels={", absl::StrJoin(labels, ","), "}", DescribeGpu(facts, rules));
}

}  // namespace

absl::StatusOr<TotalityReport> CheckTotality(const CompiledRules& rules, absl::string_view where,
                                             const std::atomic<bool>* cancel) {
  const size_t flag_count = rules.flag_names().size();
  const size_t key_count = rules.label_keys().size();

  // Size the walk before taking it.
  uint64_t per_class = SaturatingProduct(2, 2);  // supports_bf16 x priority
  per_class = SaturatingProduct(per_class, GpuCombinationCount(rules));
  per_class = SaturatingProduct(
      per_class, flag_count >= 21 ? kMaxAbstractProfiles + 1 : uint64_t{1} << flag_count);
  for (size_t key = 0; key < key_count; ++key) {
    per_class = SaturatingProduct(per_class, rules.label_values()[key].size() + 2);
  }
  uint64_t total = 0;
  for (HardwareClass hardware_class : kAllHardwareClasses) {
    total += SaturatingProduct(per_class, ArchBitsFor(hardware_class, rules).size());
    if (total > kMaxAbstractProfiles) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": policy too complex to check for totality: its rules name ", flag_count,
          " cpu flags, ", rules.arch_names().size(), " archs and ", key_count,
          " label keys and GPU bounds, which make more than ", kMaxAbstractProfiles,
          " distinct profiles to check; name fewer flags or label values"));
    }
  }

  const std::vector<GpuCombination> gpu_combinations = GpuCombinations(rules);
  TotalityReport report;
  report.rule_reachable.assign(rules.rule_count(), false);
  report.rule_class_bits.assign(rules.rule_count(), 0);
  ProfileFacts facts;
  for (HardwareClass hardware_class : kAllHardwareClasses) {
    facts.hardware_class = hardware_class;
    for (uint64_t arch_bit : ArchBitsFor(hardware_class, rules)) {
      facts.arch_bit = arch_bit;
      for (bool bf16 : {false, true}) {
        facts.supports_bf16 = bf16;
        for (v1::Priority priority : {v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
          facts.priority = priority;
          for (const GpuCombination& gpu : gpu_combinations) {
            facts.gpu = gpu.values;
            facts.mig = gpu.mig;
            facts.gpu_known = true;
            for (uint64_t flags = 0; flags < (uint64_t{1} << flag_count); ++flags) {
              facts.flags = flags;
              facts.flags_known = true;
              for (size_t key = 0; key < key_count; ++key) facts.label_values[key] = kLabelAbsent;
              while (true) {
                ++report.profiles_checked;
                if (cancel != nullptr && report.profiles_checked % kCancelCheckProfiles == 0 &&
                    cancel->load(std::memory_order_relaxed)) {
                  return absl::CancelledError(absl::StrCat(where, ": totality check abandoned"));
                }
                int match = rules.FirstMatch(facts);
                // FirstMatch tests rules in order up to the first that matches.
                report.rule_checks +=
                    match < 0 ? rules.rule_count() : static_cast<uint64_t>(match) + 1;
                if (report.rule_checks > kMaxTotalityRuleChecks) {
                  return absl::InvalidArgumentError(absl::StrCat(
                      where, ": policy too costly to check for totality: its ", rules.rule_count(),
                      " rules take more than ", kMaxTotalityRuleChecks,
                      " rule tests over the profiles they tell apart (", total,
                      "); use fewer rules, or name fewer flags or label values"));
                }
                if (match < 0) {
                  return absl::InvalidArgumentError(
                      absl::StrCat(where, ": the rules are not total: no rule matches ",
                                   DescribeFacts(facts, rules),
                                   "; add a rule (e.g. a catch-all for that hardware_class)"));
                }
                report.rule_reachable[match] = true;
                report.rule_class_bits[match] |= uint32_t{1} << static_cast<int>(hardware_class);
                // Advance the label odometer: each key runs absent, another
                // value, then each named value.
                size_t key = 0;
                for (; key < key_count; ++key) {
                  int16_t& value = facts.label_values[key];
                  const int16_t last = static_cast<int16_t>(rules.label_values()[key].size()) - 1;
                  if (value == kLabelAbsent) {
                    value = kLabelOtherValue;
                    break;
                  }
                  if (value == kLabelOtherValue) {
                    value = 0;
                    if (last >= 0) break;
                  }
                  if (value < last) {
                    ++value;
                    break;
                  }
                  value = kLabelAbsent;
                }
                if (key == key_count) break;
              }
            }
          }
        }
      }
    }
  }
  return report;
}

}  // namespace weightpath::policy
