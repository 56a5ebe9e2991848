// Rules compiled for fast matching: every string a rule tests (arch, CPU
// flag, label key and value) becomes a bit or a small index at load time, so
// deciding is a handful of mask operations and never allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/map.h"
#include "policy/gpu_facts.h"
#include "policy/policy_types.h"

namespace weightpath::policy {

using Labels = google::protobuf::Map<std::string, std::string>;

inline constexpr size_t kMaxRuleFlags = 62;
inline constexpr size_t kMaxRuleArchs = 62;
inline constexpr size_t kMaxRuleLabelKeys = 16;
inline constexpr int16_t kLabelAbsent = -1;
inline constexpr int16_t kLabelOtherValue = -2;

// The GPU facts a rule can test as a range (RuleMatch), by index.
enum class GpuFact : uint8_t { kCount, kCapability, kMemory, kL4tMajor };
inline constexpr size_t kGpuFactCount = 4;

// A profile reduced to what the rules can see.
struct ProfileFacts {
  HardwareClass hardware_class = HardwareClass::kX86Cpu;
  uint64_t arch_bit = 0;  // 0 for an arch no rule names
  bool supports_bf16 = false;
  v1::Priority priority = v1::PRIORITY_SPEED;  // SPEED or FIDELITY only
  // Bit i set: the i-th rule-named flag is present. Mapping a profile's flag
  // list (~150 names on x86) is the costliest fact, so it is computed only
  // when a rule with flag conditions is reached.
  mutable uint64_t flags = 0;
  mutable bool flags_known = false;
  const v1::HardwareProfile* profile = nullptr;  // source of flags when not known
  // Per rule-named label key: index of its value among the rule-named values
  // for that key, kLabelAbsent, or kLabelOtherValue.
  std::array<int16_t, kMaxRuleLabelKeys> label_values{};
  // The GPU facts (gpu_facts.h), by GpuFact, and MIG; read from the
  // profile's GPU list only when a rule with GPU conditions is reached.
  mutable std::array<uint64_t, kGpuFactCount> gpu{};
  mutable bool mig = false;
  mutable bool gpu_known = false;
};

// The values of one GPU fact as a rule compares them.
uint64_t GpuFactValue(const GpuFacts& facts, GpuFact fact);

// The condition that stopped a rule from matching, for traces.
enum class RuleCondition {
  kMatched,
  kHardwareClass,
  kArch,
  kSupportsBf16,
  kPriority,
  kCpuFlagsAny,
  kCpuFlagsAll,
  kCpuFlagsNone,
  kLabels,
  kGpuCount,
  kGpuCapability,
  kGpuMemory,
  kL4tMajor,
  kMig,
};
absl::string_view RuleConditionField(RuleCondition condition);

class CompiledRules {
 public:
  // INVALID_ARGUMENT (prefixed by `where`) when the rules name more flags,
  // archs or label keys than a mask can hold.
  static absl::StatusOr<CompiledRules> Compile(const std::vector<Rule>& rules,
                                               absl::string_view where);

  // `priority` must already be SPEED or FIDELITY.
  ProfileFacts FactsFor(HardwareClass hardware_class, const v1::HardwareProfile& profile,
                        v1::Priority priority, const Labels& labels) const;

  // Index of the first rule that matches, or -1.
  int FirstMatch(const ProfileFacts& facts) const;
  RuleCondition FirstFailedCondition(size_t rule_index, const ProfileFacts& facts) const;

  // What the rules name, in bit/index order; the totality check enumerates these.
  const std::vector<std::string>& arch_names() const { return arch_names_; }
  const std::vector<std::string>& flag_names() const { return flag_names_; }
  const std::vector<std::string>& label_keys() const { return label_keys_; }
  const std::vector<std::vector<std::string>>& label_values() const { return label_values_; }
  size_t rule_count() const { return compiled_.size(); }
  // Per GpuFact: 0 and every bound a rule names, ascending: one value from
  // each stretch the rules tell apart. Only 0 when no rule tests the fact.
  const std::array<std::vector<uint64_t>, kGpuFactCount>& gpu_points() const {
    return gpu_points_;
  }
  bool tests_mig() const { return tests_mig_; }

 private:
  struct CompiledRule {
    uint8_t class_mask = 0;
    uint64_t arch_mask = 0;  // 0: any arch
    uint64_t flags_any = 0;
    uint64_t flags_all = 0;
    uint64_t flags_none = 0;
    uint8_t bf16_mask = 0;      // bit 0: false allowed, bit 1: true allowed
    uint8_t priority_mask = 0;  // bit 1 << Priority value
    std::vector<std::pair<uint16_t, int16_t>> labels;  // key index, value index
    bool tests_gpu = false;
    // Per GpuFact, [lo, hi); {0, UINT64_MAX} when not tested.
    std::array<std::pair<uint64_t, uint64_t>, kGpuFactCount> gpu_ranges{};
    uint8_t mig_mask = 0b11;  // bit 0: false allowed, bit 1: true allowed
  };

  uint64_t FlagMask(const v1::HardwareProfile& profile) const;

  std::vector<CompiledRule> compiled_;
  std::vector<std::string> arch_names_;
  std::vector<std::string> flag_names_;
  // Bit n set when some rule-named flag is n characters long (n < 64): most
  // of a profile's flags are skipped on length alone.
  uint64_t flag_length_mask_ = 0;
  // Some rule-named flag is 64 characters or longer: a profile's flags of
  // that length are compared too (the mask above cannot hold their length).
  bool has_long_flag_names_ = false;
  std::vector<std::string> label_keys_;
  std::vector<std::vector<std::string>> label_values_;
  std::array<std::vector<uint64_t>, kGpuFactCount> gpu_points_;
  bool tests_mig_ = false;
};

}  // namespace weightpath::policy
