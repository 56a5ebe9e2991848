#include "store/policy_expectations.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace weightpath::store {

std::vector<PathExpectation> ExpectationsFromPolicy(const policy::Policy& policy) {
  // (path name, class) -> entry; std::map keeps the output order stable.
  std::map<std::pair<std::string, std::string>, PathExpectation> entries;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> definitions_added;
  for (const policy::Rule& rule : policy.rules()) {
    const policy::PathDefinition* path = policy.FindPath(rule.path_id);
    if (path == nullptr) continue;  // LoadPolicy refuses such rules; nothing to add
    std::vector<policy::HardwareClass> classes = rule.match.hardware_classes;
    if (classes.empty()) classes.assign(policy::kAllHardwareClasses.begin(), policy::kAllHardwareClasses.end());
    for (policy::HardwareClass hardware_class : classes) {
      const std::string class_name(policy::HardwareClassName(hardware_class));
      const auto key = std::make_pair(path->name, class_name);
      PathExpectation& entry = entries[key];
      entry.path = path->name;
      entry.hardware_class = class_name;
      entry.policy_verified = entry.policy_verified || path->verified;
      // Several rules may lead to one definition: take its figures once.
      std::vector<std::string>& added = definitions_added[key];
      if (std::find(added.begin(), added.end(), path->id) != added.end()) continue;
      added.push_back(path->id);
      entry.expected.insert(entry.expected.end(), path->expected.begin(), path->expected.end());
    }
  }
  std::vector<PathExpectation> out;
  out.reserve(entries.size());
  for (auto& [key, entry] : entries) out.push_back(std::move(entry));
  return out;
}

}  // namespace weightpath::store
