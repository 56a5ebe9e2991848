#include "policy/path_standing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "policy/absl_view.h"

namespace weightpath::policy {
namespace {

constexpr std::array<v1::Priority, 2> kPriorities = {v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY};

absl::string_view PriorityWord(v1::Priority priority) {
  return priority == v1::PRIORITY_FIDELITY ? "fidelity" : "speed";
}

bool IsHardwareCondition(RuleCondition condition) {
  return condition != RuleCondition::kMatched && condition != RuleCondition::kPriority &&
         condition != RuleCondition::kLabels;
}

bool HasFlag(const v1::HardwareProfile& profile, const std::string& flag) {
  return std::find(profile.cpu_flags().begin(), profile.cpu_flags().end(), flag) !=
         profile.cpu_flags().end();
}

// The hardware condition `rule` fails, in words: what it needs and what this
// device has instead.
std::string HardwareMismatch(const Rule& rule, RuleCondition condition,
                             HardwareClass hardware_class, const v1::HardwareProfile& profile) {
  const RuleMatch& match = rule.match;
  const std::string head = absl::StrCat("rule ", rule.name, " needs ");
  switch (condition) {
    case RuleCondition::kHardwareClass: {
      std::vector<std::string> names;
      for (HardwareClass wanted : match.hardware_classes) {
        names.emplace_back(AbslView(HardwareClassName(wanted)));
      }
      return absl::StrCat(head, "hardware_class ", absl::StrJoin(names, " or "),
                          "; this device is ", AbslView(HardwareClassName(hardware_class)));
    }
    case RuleCondition::kArch:
      return absl::StrCat(head, "arch ", absl::StrJoin(match.arch, " or "),
                          "; this device's arch is ", profile.arch());
    case RuleCondition::kSupportsBf16:
      return absl::StrCat(head, "supports_bf16 ",
                          match.supports_bf16.value_or(false) ? "true" : "false",
                          "; this device has ", profile.supports_bf16() ? "true" : "false");
    case RuleCondition::kCpuFlagsAny:
      return absl::StrCat(head, "one of the CPU flags ", absl::StrJoin(match.cpu_flags_any, ", "),
                          "; this device has none of them");
    case RuleCondition::kCpuFlagsAll: {
      std::vector<std::string> missing;
      for (const std::string& flag : match.cpu_flags_all) {
        if (!HasFlag(profile, flag)) missing.push_back(flag);
      }
      return absl::StrCat(head, "every CPU flag of ", absl::StrJoin(match.cpu_flags_all, ", "),
                          "; this device lacks ", absl::StrJoin(missing, ", "));
    }
    case RuleCondition::kCpuFlagsNone: {
      std::vector<std::string> present;
      for (const std::string& flag : match.cpu_flags_none) {
        if (HasFlag(profile, flag)) present.push_back(flag);
      }
      return absl::StrCat(head, "none of the CPU flags ", absl::StrJoin(match.cpu_flags_none, ", "),
                          "; this device has ", absl::StrJoin(present, ", "));
    }
    case RuleCondition::kGpuCount:
    case RuleCondition::kGpuCapability:
    case RuleCondition::kGpuMemory:
    case RuleCondition::kL4tMajor: {
      const GpuFacts gpu = GpuFactsOf(profile);
      const auto [field, range] =
          condition == RuleCondition::kGpuCount        ? std::make_pair("gpu_count", match.gpu_count)
          : condition == RuleCondition::kGpuCapability ? std::make_pair("gpu_capability",
                                                                        match.gpu_capability)
          : condition == RuleCondition::kGpuMemory     ? std::make_pair("gpu_memory_gib",
                                                                        match.gpu_memory)
                                                       : std::make_pair("l4t_major", match.l4t_major);
      const GpuFact fact = condition == RuleCondition::kGpuCount        ? GpuFact::kCount
                           : condition == RuleCondition::kGpuCapability ? GpuFact::kCapability
                           : condition == RuleCondition::kGpuMemory     ? GpuFact::kMemory
                                                                        : GpuFact::kL4tMajor;
      auto shown = [fact](uint64_t value) {
        if (fact == GpuFact::kCapability) return absl::StrCat(value / 10, ".", value % 10);
        if (fact == GpuFact::kMemory) {
          return absl::StrCat(std::round(static_cast<double>(value) / 1073741824.0 * 10) / 10);
        }
        return absl::StrCat(value);
      };
      std::vector<std::string> bounds;
      if (range.has_value() && range->first > 0) {
        bounds.push_back(absl::StrCat("at least ", shown(range->first)));
      }
      if (range.has_value() && range->second != UINT64_MAX) {
        bounds.push_back(absl::StrCat("below ", shown(range->second)));
      }
      return absl::StrCat(head, field, " ", absl::StrJoin(bounds, " and "), "; this device has ",
                          shown(GpuFactValue(gpu, fact)));
    }
    case RuleCondition::kMig:
      return absl::StrCat(head, match.mig.value_or(false) ? "a MIG instance" : "a whole GPU (no MIG)",
                          "; this device's GPU is ",
                          GpuFactsOf(profile).mig ? "a MIG instance" : "not a MIG instance");
    default:
      return absl::StrCat("rule ", rule.name, " does not match");
  }
}

// Why a rule whose hardware conditions this device meets did not choose its
// path, at each priority: another rule came first, or its priority or label
// conditions are not this request's.
std::string NotChosenBecause(const Rule& rule, const std::array<RuleCondition, 2>& failed,
                             const std::array<Decision, 2>& decisions) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < kPriorities.size(); ++i) {
    const absl::string_view priority = PriorityWord(kPriorities[i]);
    switch (failed[i]) {
      case RuleCondition::kMatched:
        parts.push_back(absl::StrCat("at priority ", priority, " the earlier rule ",
                                     decisions[i].rule->name, " chooses ",
                                     decisions[i].path->id));
        break;
      case RuleCondition::kPriority:
        parts.push_back(absl::StrCat("it does not apply at priority ", priority));
        break;
      case RuleCondition::kLabels: {
        std::vector<std::string> wanted;
        for (const auto& [key, value] : rule.match.labels) {
          wanted.push_back(absl::StrCat(key, "=", value));
        }
        parts.push_back(absl::StrCat("at priority ", priority, " it needs the labels ",
                                     absl::StrJoin(wanted, ",")));
        break;
      }
      default:
        break;
    }
  }
  return absl::StrCat("rule ", rule.name, " routes here, but ", absl::StrJoin(parts, "; "));
}

}  // namespace

absl::StatusOr<PathStanding> JudgePath(const Policy& policy, const PathDefinition& path,
                                       const v1::HardwareProfile& profile, const Labels& labels,
                                       const ModelFacts& model) {
  ASSIGN_OR_RETURN(const HardwareClass hardware_class, ClassifyHardware(profile));
  const CompiledRules& compiled = policy.compiled_rules();
  std::array<ProfileFacts, 2> facts;
  std::array<Decision, 2> decisions;
  for (size_t i = 0; i < kPriorities.size(); ++i) {
    facts[i] = compiled.FactsFor(hardware_class, profile, kPriorities[i], labels);
    ASSIGN_OR_RETURN(decisions[i], Evaluate(policy, profile, kPriorities[i], labels));
  }

  PathStanding standing;
  standing.path = &path;
  std::vector<std::string> chosen_by;
  for (size_t i = 0; i < kPriorities.size(); ++i) {
    if (decisions[i].path->id != path.id) continue;
    standing.chosen_for.push_back(kPriorities[i]);
    chosen_by.push_back(absl::StrCat("rule ", decisions[i].rule->name, " at priority ",
                                     PriorityWord(kPriorities[i])));
  }
  standing.fit = JudgeFit(path, profile, model);
  if (!standing.chosen_for.empty()) {
    standing.standing = PathStandingKind::kChosen;
    standing.reason = absl::StrCat("chosen by ", absl::StrJoin(chosen_by, "; "));
    return standing;
  }

  std::vector<std::string> mismatches;
  for (size_t index = 0; index < policy.rules().size(); ++index) {
    const Rule& rule = policy.rules()[index];
    if (rule.path_id != path.id) continue;
    std::array<RuleCondition, 2> failed;
    for (size_t i = 0; i < kPriorities.size(); ++i) {
      failed[i] = compiled.FirstFailedCondition(index, facts[i]);
    }
    // Priority is tested before the CPU flags, so the hardware verdict is
    // read at a priority the rule applies at.
    const RuleCondition hardware =
        failed[0] != RuleCondition::kPriority ? failed[0] : failed[1];
    if (IsHardwareCondition(hardware)) {
      mismatches.push_back(HardwareMismatch(rule, hardware, hardware_class, profile));
      continue;
    }
    if (standing.fit.kind == FitKind::kIncompatible) {
      standing.standing = PathStandingKind::kIncompatible;
      standing.reason = absl::StrCat(standing.fit.requirement, ": ", standing.fit.reason);
      return standing;
    }
    standing.standing = PathStandingKind::kCompatible;
    standing.reason = NotChosenBecause(rule, failed, decisions);
    return standing;
  }
  standing.standing = PathStandingKind::kIncompatible;
  standing.reason = mismatches.empty() ? std::string("no rule of the policy routes to it")
                                       : absl::StrJoin(mismatches, "; ");
  return standing;
}

absl::StatusOr<std::vector<PathStanding>> JudgePaths(const Policy& policy,
                                                     const v1::HardwareProfile& profile,
                                                     const Labels& labels,
                                                     const ModelFacts& model) {
  std::vector<PathStanding> standings;
  standings.reserve(policy.paths().size());
  for (const PathDefinition& path : policy.paths()) {
    ASSIGN_OR_RETURN(PathStanding standing, JudgePath(policy, path, profile, labels, model));
    standings.push_back(std::move(standing));
  }
  return standings;
}

}  // namespace weightpath::policy
