// How large a policy document may be. A policy is reloaded while the server
// serves, so every limit here bounds what one reload can cost in memory and
// CPU; a document over any of them is refused whole, naming the limit, and
// the last good policy keeps serving.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weightpath::policy {

// The text, and the scalar text it amounts to once YAML aliases are
// expanded (an alias counts as the text it repeats).
inline constexpr size_t kMaxPolicyBytes = 16 * 1024 * 1024;
// YAML nodes once aliases are expanded: yaml-cpp holds about 0.5 KB a node,
// so this keeps a document's tree under ~100 MB. A policy at the rule and
// path limits below needs well under a quarter of it.
inline constexpr size_t kMaxPolicyNodes = 200000;
// Rules and path definitions. Real policies have a handful of each; these
// bound the totality check (profiles times rules) and every per-rule loop.
inline constexpr size_t kMaxPolicyRules = 1000;
inline constexpr size_t kMaxPolicyPaths = 1000;
// The totality check's work, counted in rule tests (one profile tested
// against one rule), whatever the shape of the rules: about a second of CPU.
// A policy needing more is refused as too costly to check, the same way
// every time, rather than holding a reload for minutes.
inline constexpr uint64_t kMaxTotalityRuleChecks = uint64_t{1} << 28;
// An expected figure's cpu_model_aliases: other names of one part, a few at
// most; every report judged against the figure tries each.
inline constexpr size_t kMaxCpuModelAliases = 64;
inline constexpr size_t kMaxCpuModelAliasBytes = 256;

}  // namespace weightpath::policy
