#include "policy/compiled_rules.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace weightpath::policy {
namespace {

// Index of `name` in `names`, appending it when new.
size_t InternName(std::vector<std::string>& names, const std::string& name) {
  auto found = std::find(names.begin(), names.end(), name);
  if (found != names.end()) return static_cast<size_t>(found - names.begin());
  names.push_back(name);
  return names.size() - 1;
}

uint8_t ClassBit(HardwareClass hardware_class) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(hardware_class));
}

uint8_t PriorityBit(v1::Priority priority) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(priority));
}

absl::Status TooMany(absl::string_view where, absl::string_view what, size_t limit) {
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": the rules name more than ", limit, " distinct ", what,
      "; the policy is too complex to evaluate"));
}

constexpr std::pair<uint64_t, uint64_t> kAnyValue = {0, UINT64_MAX};

}  // namespace

uint64_t GpuFactValue(const GpuFacts& facts, GpuFact fact) {
  switch (fact) {
    case GpuFact::kCount:
      return facts.count;
    case GpuFact::kCapability:
      return facts.capability_tenths;
    case GpuFact::kMemory:
      return facts.memory_total_bytes;
    case GpuFact::kL4tMajor:
      return facts.l4t_major;
  }
  return 0;
}

absl::string_view RuleConditionField(RuleCondition condition) {
  switch (condition) {
    case RuleCondition::kMatched:
      return "";
    case RuleCondition::kHardwareClass:
      return "hardware_class";
    case RuleCondition::kArch:
      return "arch";
    case RuleCondition::kSupportsBf16:
      return "supports_bf16";
    case RuleCondition::kPriority:
      return "priority";
    case RuleCondition::kCpuFlagsAny:
      return "cpu_flags_any";
    case RuleCondition::kCpuFlagsAll:
      return "cpu_flags_all";
    case RuleCondition::kCpuFlagsNone:
      return "cpu_flags_none";
    case RuleCondition::kLabels:
      return "labels";
    case RuleCondition::kGpuCount:
      return "gpu_count";
    case RuleCondition::kGpuCapability:
      return "gpu_capability";
    case RuleCondition::kGpuMemory:
      return "gpu_memory_gib";
    case RuleCondition::kL4tMajor:
      return "l4t_major";
    case RuleCondition::kMig:
      return "mig";
  }
  return "";
}

absl::StatusOr<CompiledRules> CompiledRules::Compile(const std::vector<Rule>& rules,
                                                     absl::string_view where) {
  CompiledRules result;
  // x86_64 and aarch64 always get a bit so every consistent profile has one.
  result.arch_names_ = {"x86_64", "aarch64"};
  for (const Rule& rule : rules) {
    const RuleMatch& match = rule.match;
    CompiledRule compiled;

    for (HardwareClass hardware_class : match.hardware_classes) {
      compiled.class_mask |= ClassBit(hardware_class);
    }
    if (match.hardware_classes.empty()) compiled.class_mask = 0xff;

    for (const std::string& arch : match.arch) {
      size_t index = InternName(result.arch_names_, arch);
      if (index >= kMaxRuleArchs) return TooMany(where, "archs", kMaxRuleArchs);
      compiled.arch_mask |= uint64_t{1} << index;
    }

    auto flag_mask = [&](const std::vector<std::string>& flags) -> absl::StatusOr<uint64_t> {
      uint64_t mask = 0;
      for (const std::string& flag : flags) {
        size_t index = InternName(result.flag_names_, flag);
        if (index >= kMaxRuleFlags) return TooMany(where, "cpu flags", kMaxRuleFlags);
        mask |= uint64_t{1} << index;
      }
      return mask;
    };
    absl::StatusOr<uint64_t> any = flag_mask(match.cpu_flags_any);
    if (!any.ok()) return any.status();
    absl::StatusOr<uint64_t> all = flag_mask(match.cpu_flags_all);
    if (!all.ok()) return all.status();
    absl::StatusOr<uint64_t> none = flag_mask(match.cpu_flags_none);
    if (!none.ok()) return none.status();
    compiled.flags_any = *any;
    compiled.flags_all = *all;
    compiled.flags_none = *none;

    if (match.supports_bf16.has_value()) {
      compiled.bf16_mask = *match.supports_bf16 ? 0b10 : 0b01;
    } else {
      compiled.bf16_mask = 0b11;
    }

    for (v1::Priority priority : match.priorities) {
      compiled.priority_mask |= PriorityBit(priority);
    }
    if (match.priorities.empty()) {
      compiled.priority_mask = PriorityBit(v1::PRIORITY_SPEED) | PriorityBit(v1::PRIORITY_FIDELITY);
    }

    for (const auto& [key, value] : match.labels) {
      size_t key_index = InternName(result.label_keys_, key);
      if (key_index >= kMaxRuleLabelKeys) return TooMany(where, "label keys", kMaxRuleLabelKeys);
      if (result.label_values_.size() <= key_index) result.label_values_.resize(key_index + 1);
      size_t value_index = InternName(result.label_values_[key_index], value);
      compiled.labels.emplace_back(static_cast<uint16_t>(key_index),
                                   static_cast<int16_t>(value_index));
    }

    compiled.gpu_ranges.fill(kAnyValue);
    const std::optional<std::pair<uint64_t, uint64_t>>* ranges[kGpuFactCount] = {
        &match.gpu_count, &match.gpu_capability, &match.gpu_memory, &match.l4t_major};
    for (size_t fact = 0; fact < kGpuFactCount; ++fact) {
      if (!ranges[fact]->has_value()) continue;
      compiled.tests_gpu = true;
      compiled.gpu_ranges[fact] = **ranges[fact];
      std::vector<uint64_t>& points = result.gpu_points_[fact];
      points.push_back(compiled.gpu_ranges[fact].first);
      if (compiled.gpu_ranges[fact].second != UINT64_MAX) {
        points.push_back(compiled.gpu_ranges[fact].second);
      }
    }
    if (match.mig.has_value()) {
      compiled.tests_gpu = true;
      compiled.mig_mask = *match.mig ? 0b10 : 0b01;
      result.tests_mig_ = true;
    }
    result.compiled_.push_back(std::move(compiled));
  }
  for (std::vector<uint64_t>& points : result.gpu_points_) {
    points.push_back(0);
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
  }
  for (const std::string& flag : result.flag_names_) {
    if (flag.size() < 64) {
      result.flag_length_mask_ |= uint64_t{1} << flag.size();
    } else {
      result.has_long_flag_names_ = true;
    }
  }
  return result;
}

uint64_t CompiledRules::FlagMask(const v1::HardwareProfile& profile) const {
  if (flag_names_.empty()) return 0;
  const uint64_t every_named_flag = (uint64_t{1} << flag_names_.size()) - 1;
  uint64_t mask = 0;
  for (const std::string& flag : profile.cpu_flags()) {
    if (mask == every_named_flag) break;
    const size_t length = flag.size();
    if (length >= 64 ? !has_long_flag_names_ : (flag_length_mask_ & (uint64_t{1} << length)) == 0) {
      continue;
    }
    for (size_t i = 0; i < flag_names_.size(); ++i) {
      if (flag_names_[i] == flag) {
        mask |= uint64_t{1} << i;
        break;
      }
    }
  }
  return mask;
}

ProfileFacts CompiledRules::FactsFor(HardwareClass hardware_class,
                                     const v1::HardwareProfile& profile, v1::Priority priority,
                                     const Labels& labels) const {
  ProfileFacts facts;
  facts.hardware_class = hardware_class;
  for (size_t i = 0; i < arch_names_.size(); ++i) {
    if (arch_names_[i] == profile.arch()) {
      facts.arch_bit = uint64_t{1} << i;
      break;
    }
  }
  facts.supports_bf16 = profile.supports_bf16();
  facts.priority = priority;
  facts.profile = &profile;
  for (size_t key = 0; key < label_keys_.size(); ++key) {
    auto found = labels.find(label_keys_[key]);
    if (found == labels.end()) {
      facts.label_values[key] = kLabelAbsent;
      continue;
    }
    facts.label_values[key] = kLabelOtherValue;
    const std::vector<std::string>& values = label_values_[key];
    for (size_t v = 0; v < values.size(); ++v) {
      if (values[v] == found->second) {
        facts.label_values[key] = static_cast<int16_t>(v);
        break;
      }
    }
  }
  return facts;
}

RuleCondition CompiledRules::FirstFailedCondition(size_t rule_index,
                                                  const ProfileFacts& facts) const {
  const CompiledRule& rule = compiled_[rule_index];
  if ((rule.class_mask & ClassBit(facts.hardware_class)) == 0) return RuleCondition::kHardwareClass;
  if (rule.arch_mask != 0 && (rule.arch_mask & facts.arch_bit) == 0) return RuleCondition::kArch;
  if ((rule.bf16_mask & (facts.supports_bf16 ? 0b10 : 0b01)) == 0) {
    return RuleCondition::kSupportsBf16;
  }
  if ((rule.priority_mask & PriorityBit(facts.priority)) == 0) return RuleCondition::kPriority;
  if (rule.tests_gpu) {
    if (!facts.gpu_known) {
      const GpuFacts gpu = facts.profile != nullptr ? GpuFactsOf(*facts.profile) : GpuFacts{};
      for (size_t fact = 0; fact < kGpuFactCount; ++fact) {
        facts.gpu[fact] = GpuFactValue(gpu, static_cast<GpuFact>(fact));
      }
      facts.mig = gpu.mig;
      facts.gpu_known = true;
    }
    static constexpr RuleCondition kConditions[kGpuFactCount] = {
        RuleCondition::kGpuCount, RuleCondition::kGpuCapability, RuleCondition::kGpuMemory,
        RuleCondition::kL4tMajor};
    for (size_t fact = 0; fact < kGpuFactCount; ++fact) {
      const auto& [lo, hi] = rule.gpu_ranges[fact];
      if (facts.gpu[fact] < lo || facts.gpu[fact] >= hi) return kConditions[fact];
    }
    if ((rule.mig_mask & (facts.mig ? 0b10 : 0b01)) == 0) return RuleCondition::kMig;
  }
  const bool tests_flags = (rule.flags_any | rule.flags_all | rule.flags_none) != 0;
  if (tests_flags && !facts.flags_known) {
    facts.flags = facts.profile != nullptr ? FlagMask(*facts.profile) : 0;
    facts.flags_known = true;
  }
  if (rule.flags_any != 0 && (rule.flags_any & facts.flags) == 0) return RuleCondition::kCpuFlagsAny;
  if ((rule.flags_all & facts.flags) != rule.flags_all) return RuleCondition::kCpuFlagsAll;
  if ((rule.flags_none & facts.flags) != 0) return RuleCondition::kCpuFlagsNone;
  for (const auto& [key, value] : rule.labels) {
    if (facts.label_values[key] != value) return RuleCondition::kLabels;
  }
  return RuleCondition::kMatched;
}

int CompiledRules::FirstMatch(const ProfileFacts& facts) const {
  for (size_t i = 0; i < compiled_.size(); ++i) {
    if (FirstFailedCondition(i, facts) == RuleCondition::kMatched) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace weightpath::policy
