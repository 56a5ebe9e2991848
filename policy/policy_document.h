// Reads a policy document's YAML into typed paths and rules, checking every
// field and every reference on the way. Totality is checked elsewhere, on the
// compiled rules.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/policy_types.h"

namespace weightpath::policy {

struct PolicyDocument {
  std::vector<PathDefinition> paths;
  std::vector<Rule> rules;
  // "<source>:<line>" of the `rules:` key, where totality faults point.
  std::string rules_location;
};

// INVALID_ARGUMENT naming `source_name`, line, column and field path of the
// first fault found, or the limit (policy_limits.h) the document is over.
// CANCELLED when `cancel` is set while the YAML is read.
absl::StatusOr<PolicyDocument> ParsePolicyDocument(absl::string_view yaml_text,
                                                   absl::string_view source_name,
                                                   const std::atomic<bool>* cancel = nullptr);

}  // namespace weightpath::policy
