// The weight-path policy: path definitions and ordered match rules, loaded
// from a YAML document, validated whole, and evaluated as a pure function.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/map.h"
#include "google/protobuf/struct.pb.h"
#include "policy/hardware_class.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::policy {

using Labels = google::protobuf::Map<std::string, std::string>;

// A figure measured for a path on reference hardware, with its conditions.
struct ExpectedFigures {
  std::string cpu_model;       // e.g. "Intel Xeon Platinum 8480C"
  uint32_t threads = 0;
  std::string model;           // e.g. "Spark-X2.5-1.7B"
  std::string condition;       // how the figure was taken
  std::optional<double> decode_tok_s;
  std::optional<double> prefill_vs_llama_cpp;
  std::optional<double> gemm_ms_per_step;
  std::optional<double> step_ms;
  std::optional<uint32_t> fidelity_exact_matches;
  std::optional<uint32_t> fidelity_prompts;
};

// One weight build and how to run it. Several definitions may share a name
// (the same build on different hardware, with its own rationale).
struct PathDefinition {
  std::string id;              // unique within the policy
  std::string name;            // what devices and the catalog call the build
  std::string quantization;    // empty keeps the model dtype
  std::optional<uint32_t> group_size;
  std::optional<double> bits_per_weight;
  bool fused_cpu_norms = false;
  bool runs_in_vllm = true;
  bool verified = false;       // measured on hardware by the policy's authors
  std::string rationale;
  std::string build_with;
  std::vector<std::string> notes;
  std::vector<ExpectedFigures> expected;
};

// Conditions are ANDed; an absent condition matches anything.
struct RuleMatch {
  std::vector<HardwareClass> hardware_classes;
  std::vector<std::string> arch;
  std::vector<std::string> cpu_flags_any;   // at least one present
  std::vector<std::string> cpu_flags_all;   // all present
  std::vector<std::string> cpu_flags_none;  // none present
  std::optional<bool> supports_bf16;
  std::vector<v1::Priority> priorities;     // SPEED and/or FIDELITY
  std::vector<std::pair<std::string, std::string>> labels;  // equality
};

struct Rule {
  std::string name;
  RuleMatch match;
  std::string path_id;
};

struct Decision;

class Policy {
 public:
  virtual ~Policy() = default;
  virtual const std::vector<PathDefinition>& paths() const = 0;
  virtual const std::vector<Rule>& rules() const = 0;
  virtual const PathDefinition* FindPath(std::string_view id) const = 0;
  // Distinct path names some reachable profile can be given (the catalog
  // must carry an artifact for each).
  virtual std::vector<std::string> ReachablePathNames() const = 0;
  // "sha256:" + first 16 hex digits of the SHA-256 of the document text.
  virtual const std::string& version() const = 0;
  virtual const std::string& source_name() const = 0;
};

// Parses and validates a whole document; any fault refuses it whole with
// INVALID_ARGUMENT naming `source_name`, the line and the field path.
absl::StatusOr<std::shared_ptr<const Policy>> LoadPolicy(std::string_view yaml_text,
                                                         std::string_view source_name);

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
// speed. INVALID_ARGUMENT when the profile cannot be classified.
absl::StatusOr<Decision> Evaluate(const Policy& policy, const v1::HardwareProfile& profile,
                                  v1::Priority priority, const Labels& labels);

// The rules in order, each with whether it matched (for ExplainDecision).
std::vector<std::string> TraceRules(const Policy& policy, const v1::HardwareProfile& profile,
                                    v1::Priority priority, const Labels& labels);

// Copies a definition into the API message (verification left to the caller).
void FillWeightPathSpec(const PathDefinition& path, v1::WeightPathSpec* out);
// {"quantization": q} when the path runs in vLLM and quantizes; else empty.
void FillEngineKwargs(const PathDefinition& path, google::protobuf::Struct* out);

}  // namespace weightpath::policy
