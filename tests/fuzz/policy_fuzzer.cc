// The policy document: YAML text in, a validated Policy or a refusal out.
//
// Beyond "no crash", an accepted policy must keep what loading promises:
//  - totality: every profile that classifies gets a decision (Evaluate never
//    answers the INTERNAL "matched no rule"), whatever its labels;
//  - the compiled rules (bit masks) choose exactly the rule a plain reading
//    of the typed rules chooses, and TraceRules agrees with both;
//  - loading is deterministic (same version, same rules).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "policy/hardware_class.h"
#include "policy/policy.h"
#include "policy/profile_json.h"
#include "tests/fuzz/fuzz_support.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::fuzz {
namespace {

using policy::Decision;
using policy::HardwareClass;
using policy::Labels;
using policy::Policy;
using policy::Rule;

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

bool HasFlag(const v1::HardwareProfile& profile, const std::string& flag) {
  return std::find(profile.cpu_flags().begin(), profile.cpu_flags().end(), flag) !=
         profile.cpu_flags().end();
}

// The rule as the policy document reads, without the compiled masks.
bool PlainMatch(const Rule& rule, HardwareClass hardware_class, const v1::HardwareProfile& profile,
                v1::Priority priority, const Labels& labels) {
  const policy::RuleMatch& match = rule.match;
  if (!match.hardware_classes.empty() &&
      std::find(match.hardware_classes.begin(), match.hardware_classes.end(), hardware_class) ==
          match.hardware_classes.end()) {
    return false;
  }
  if (!match.arch.empty() && !Contains(match.arch, profile.arch())) return false;
  if (match.supports_bf16.has_value() && *match.supports_bf16 != profile.supports_bf16()) {
    return false;
  }
  if (!match.priorities.empty() &&
      std::find(match.priorities.begin(), match.priorities.end(), priority) ==
          match.priorities.end()) {
    return false;
  }
  if (!match.cpu_flags_any.empty() &&
      std::none_of(match.cpu_flags_any.begin(), match.cpu_flags_any.end(),
                   [&](const std::string& flag) { return HasFlag(profile, flag); })) {
    return false;
  }
  for (const std::string& flag : match.cpu_flags_all) {
    if (!HasFlag(profile, flag)) return false;
  }
  for (const std::string& flag : match.cpu_flags_none) {
    if (HasFlag(profile, flag)) return false;
  }
  for (const auto& [key, value] : match.labels) {
    auto found = labels.find(key);
    if (found == labels.end() || found->second != value) return false;
  }
  return true;
}

// Profiles that reach each class with and without the flags and archs the
// rules name, so that a rule is tested both ways.
std::vector<v1::HardwareProfile> ProbingProfiles(const Policy& policy) {
  std::set<std::string> archs = {"x86_64", "aarch64", "riscv64"};
  std::vector<std::string> flags;
  for (const Rule& rule : policy.rules()) {
    for (const auto& arch : rule.match.arch) archs.insert(arch);
    for (const auto* list : {&rule.match.cpu_flags_any, &rule.match.cpu_flags_all,
                             &rule.match.cpu_flags_none}) {
      for (const auto& flag : *list) {
        if (!Contains(flags, flag)) flags.push_back(flag);
      }
    }
  }
  std::vector<std::vector<std::string>> flag_sets = {{}, flags};
  // Each named flag alone, and all but it: enough to tell any/all/none apart.
  for (size_t i = 0; i < flags.size() && i < 8; ++i) {
    flag_sets.push_back({flags[i]});
    std::vector<std::string> others = flags;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    flag_sets.push_back(others);
  }
  std::vector<v1::HardwareProfile> profiles;
  const char* accelerators[] = {"none", "cuda_discrete", "cuda_unified", "npu:qualcomm"};
  size_t arch_count = 0;
  for (const std::string& arch : archs) {
    if (++arch_count > 6) break;
    for (const char* accelerator : accelerators) {
      for (bool bf16 : {false, true}) {
        for (const auto& set : flag_sets) {
          v1::HardwareProfile profile;
          profile.set_arch(arch);
          profile.set_accelerator(accelerator);
          profile.set_supports_bf16(bf16);
          for (const auto& flag : set) profile.add_cpu_flags(flag);
          profiles.push_back(std::move(profile));
        }
      }
    }
  }
  return profiles;
}

std::vector<Labels> ProbingLabels(const Policy& policy) {
  std::vector<Labels> label_sets(1);  // no labels at all
  for (const Rule& rule : policy.rules()) {
    if (rule.match.labels.empty() || label_sets.size() >= 6) continue;
    Labels labels;
    for (const auto& [key, value] : rule.match.labels) labels[key] = value;
    label_sets.push_back(labels);
    // The same keys with other values: "present but different".
    Labels other;
    for (const auto& [key, value] : rule.match.labels) other[key] = value + "x";
    label_sets.push_back(other);
  }
  return label_sets;
}

void CheckAccepted(const Policy& policy, std::string_view text) {
  FUZZ_CHECK(!policy.rules().empty() && !policy.paths().empty(), "an empty policy was accepted");
  for (const Rule& rule : policy.rules()) {
    FUZZ_CHECK(policy.FindPath(rule.path_id) != nullptr,
               absl::StrCat("rule ", rule.name, " names undefined path ", rule.path_id));
  }
  for (const std::string& name : policy.ReachablePathNames()) {
    FUZZ_CHECK(!name.empty(), "a reachable path without a name");
  }
  for (const auto& path : policy.paths()) {
    v1::WeightPathSpec spec;
    policy::FillWeightPathSpec(path, &spec);
    google::protobuf::Struct kwargs;
    policy::FillEngineKwargs(path, &kwargs);
  }

  // Deterministic: the same text loads to the same policy.
  auto again = policy::LoadPolicy(text, "fuzz.yaml");
  FUZZ_CHECK(again.ok(), absl::StrCat("second load refused: ", again.status().ToString()));
  FUZZ_CHECK((*again)->version() == policy.version(), "version differs between two loads");
  FUZZ_CHECK((*again)->rules().size() == policy.rules().size(), "rule count differs");

  const std::vector<v1::HardwareProfile> profiles = ProbingProfiles(policy);
  const std::vector<Labels> label_sets = ProbingLabels(policy);
  size_t evaluations = 0;
  for (const v1::HardwareProfile& profile : profiles) {
    const absl::StatusOr<HardwareClass> hardware_class = policy::ClassifyHardware(profile);
    for (v1::Priority priority :
         {v1::PRIORITY_UNSPECIFIED, v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
      for (const Labels& labels : label_sets) {
        if (++evaluations > 4000) return;  // keeps one input under a few ms
        absl::StatusOr<Decision> decision = policy::Evaluate(policy, profile, priority, labels);
        if (!hardware_class.ok()) {
          FUZZ_CHECK(!decision.ok(), "an unclassifiable profile was decided");
          continue;
        }
        FUZZ_CHECK(decision.ok(),
                   absl::StrCat("accepted policy is not total: ", decision.status().ToString(),
                                " for ", profile.ShortDebugString()));
        const v1::Priority effective =
            priority == v1::PRIORITY_UNSPECIFIED ? v1::PRIORITY_SPEED : priority;
        FUZZ_CHECK(decision->effective_priority == effective, "effective priority differs");
        FUZZ_CHECK(decision->hardware_class == *hardware_class, "hardware class differs");
        int plain = -1;
        for (size_t i = 0; i < policy.rules().size(); ++i) {
          if (PlainMatch(policy.rules()[i], *hardware_class, profile, effective, labels)) {
            plain = static_cast<int>(i);
            break;
          }
        }
        const int compiled = static_cast<int>(decision->rule - policy.rules().data());
        FUZZ_CHECK(plain == compiled,
                   absl::StrCat("compiled rules chose rule ", compiled, ", the rules say ", plain,
                                " for ", profile.ShortDebugString()));
        FUZZ_CHECK(decision->path == policy.FindPath(decision->rule->path_id),
                   "decision path is not the rule's");
        const std::vector<std::string> trace = policy::TraceRules(policy, profile, priority, labels);
        FUZZ_CHECK(trace.size() == policy.rules().size(), "trace has the wrong length");
        FUZZ_CHECK(absl::StrContains(trace[compiled], "matched, chosen"),
                   absl::StrCat("trace disagrees: ", trace[compiled]));
      }
    }
  }
}

}  // namespace
}  // namespace weightpath::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  const std::string_view text = fuzz::Text(data, size);
  auto loaded = policy::LoadPolicy(text, "fuzz.yaml");
  if (!loaded.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(loaded.status()), loaded.status().ToString());
    return 0;
  }
  fuzz::CheckAccepted(**loaded, text);
  return 0;
}
