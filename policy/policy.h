// The weight-path policy: path definitions and ordered match rules, loaded
// from a YAML document, validated whole, and evaluated as a pure function.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/map.h"
#include "google/protobuf/struct.pb.h"
#include "policy/compiled_rules.h"
#include "policy/hardware_class.h"
#include "policy/policy_limits.h"
#include "policy/policy_types.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::policy {

struct Decision;

// Immutable once loaded; share it freely between threads.
class Policy {
 public:
  const std::vector<PathDefinition>& paths() const { return paths_; }
  const std::vector<Rule>& rules() const { return rules_; }
  // Null when no definition has that id.
  const PathDefinition* FindPath(std::string_view id) const;
  // Distinct path names some reachable profile can be given (the catalog
  // must carry an artifact for each), in first-appearance order.
  std::vector<std::string> ReachablePathNames() const;
  // The hardware classes some profile of which is routed to `path_name`
  // (in kAllHardwareClasses order): the classes an artifact for that path
  // must be built for.
  std::vector<HardwareClass> HardwareClassesRoutedTo(std::string_view path_name) const;
  // Rules that are the first match for no profile at all (shadowed by
  // earlier rules); allowed, but worth a warning where policies are loaded.
  const std::vector<std::string>& UnreachableRuleNames() const { return unreachable_rules_; }
  // The rules as Evaluate tests them, for judging one rule against a
  // profile (path_standing.h) with the evaluator's own test.
  const CompiledRules& compiled_rules() const { return compiled_; }
  // "sha256:" + first 16 hex digits of the SHA-256 of the document text.
  const std::string& version() const { return version_; }
  const std::string& source_name() const { return source_name_; }

 private:
  friend absl::StatusOr<std::shared_ptr<const Policy>> LoadPolicy(std::string_view,
                                                                  std::string_view,
                                                                  const std::atomic<bool>*);
  friend absl::StatusOr<Decision> Evaluate(const Policy&, HardwareClass,
                                           const v1::HardwareProfile&, v1::Priority,
                                           const Labels&);
  friend std::vector<std::string> TraceRules(const Policy&, const v1::HardwareProfile&,
                                             v1::Priority, const Labels&);

  Policy() = default;

  std::vector<PathDefinition> paths_;
  std::vector<Rule> rules_;
  // Parallel to rules_: the definition each rule selects.
  std::vector<const PathDefinition*> rule_paths_;
  std::vector<bool> rule_reachable_;
  std::vector<uint32_t> rule_class_bits_;  // TotalityReport::rule_class_bits
  std::vector<std::string> unreachable_rules_;
  CompiledRules compiled_;
  std::string version_;
  std::string source_name_;
};

// Parses and validates a whole document; any fault refuses it whole with
// INVALID_ARGUMENT naming `source_name`, the line and the field path, and a
// document over a limit of policy_limits.h is refused naming the limit.
// `cancel`, when set from another thread (a server shutting down), makes a
// load in progress return CANCELLED within milliseconds.
absl::StatusOr<std::shared_ptr<const Policy>> LoadPolicy(std::string_view yaml_text,
                                                         std::string_view source_name,
                                                         const std::atomic<bool>* cancel = nullptr);

// The bundled default policy (policy/default_policy.yaml, embedded at build).
std::string_view DefaultPolicyYaml();
std::shared_ptr<const Policy> DefaultPolicy();

struct Decision {
  HardwareClass hardware_class;
  const PathDefinition* path = nullptr;  // owned by the Policy
  const Rule* rule = nullptr;            // owned by the Policy
  v1::Priority effective_priority = v1::PRIORITY_SPEED;
};

// Pure and allocation-free on the success path. UNSPECIFIED priority means
// speed. INVALID_ARGUMENT when the profile cannot be classified or the
// priority is not a known value.
absl::StatusOr<Decision> Evaluate(const Policy& policy, const v1::HardwareProfile& profile,
                                  v1::Priority priority, const Labels& labels);
// The same, for a caller that has already classified the profile (a resolve
// classifies once, when it validates the request): `hardware_class` must be
// ClassifyHardware(profile)'s.
absl::StatusOr<Decision> Evaluate(const Policy& policy, HardwareClass hardware_class,
                                  const v1::HardwareProfile& profile, v1::Priority priority,
                                  const Labels& labels);

// The rules in order, each with whether it matched (for ExplainDecision).
std::vector<std::string> TraceRules(const Policy& policy, const v1::HardwareProfile& profile,
                                    v1::Priority priority, const Labels& labels);

// Copies a definition into the API message (verification left to the caller).
void FillWeightPathSpec(const PathDefinition& path, v1::WeightPathSpec* out);
// {"quantization": q} when the path runs in vLLM and quantizes; else empty.
void FillEngineKwargs(const PathDefinition& path, google::protobuf::Struct* out);

}  // namespace weightpath::policy
