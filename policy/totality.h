// Proves a rule set total: every profile the rules can tell apart is matched
// by some rule. Profiles are enumerated abstractly: only the values the rules
// name (plus "absent" and "something else") can change a decision, so a
// finite walk covers the infinite space.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/compiled_rules.h"
#include "policy/policy_limits.h"

namespace weightpath::policy {

// Walking more abstract profiles than this would make loading slow; such a
// policy is refused as too complex to check.
inline constexpr uint64_t kMaxAbstractProfiles = uint64_t{1} << 20;

struct TotalityReport {
  // Per rule: whether it is the first match for at least one profile.
  std::vector<bool> rule_reachable;
  // Per rule: the hardware classes (bit static_cast<int>(HardwareClass)) of
  // the profiles it is the first match for.
  std::vector<uint32_t> rule_class_bits;
  uint64_t profiles_checked = 0;
  // Profiles tested against rules, summed: the work kMaxTotalityRuleChecks
  // bounds.
  uint64_t rule_checks = 0;
};

// INVALID_ARGUMENT, prefixed by `where`, naming an unmatched example profile,
// or saying the space is too large or too costly to check. CANCELLED when
// `cancel` is set while the check runs (polled every few thousand profiles).
absl::StatusOr<TotalityReport> CheckTotality(const CompiledRules& rules, absl::string_view where,
                                             const std::atomic<bool>* cancel = nullptr);

}  // namespace weightpath::policy
