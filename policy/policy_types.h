// The typed form of a policy document: path definitions and match rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "policy/expression.h"
#include "policy/hardware_class.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::policy {

// A figure measured for a path on reference hardware, with its conditions.
struct ExpectedFigures {
  std::string cpu_model;       // e.g. "Intel Xeon Platinum 8480C"
  // Other names of the same part, or patterns with '*', compared after
  // NormalizeCpuModel (policy/cpu_model.h), e.g. "Intel Xeon Platinum 8480+".
  std::vector<std::string> cpu_model_aliases;
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

// One engine argument the path derives per device (engine_args.h).
struct EngineArg {
  std::string name;  // one of EngineArgKinds()
  Expression expression;
  std::string location;  // "<source>:<line>", for messages
};

// What a device must have for the path to run there; each absent
// requirement holds everywhere. `paths` and `explain` judge them
// (engine_args.h JudgeFit); the rules alone decide.
struct PathRequirements {
  std::optional<uint32_t> gpus;                     // identical usable GPUs, at least
  std::optional<uint32_t> gpu_capability_tenths;    // at least (8.9 is 89)
  std::optional<uint32_t> l4t_major;                // at least
  std::optional<Expression> weights_per_gpu_bytes;  // must fit the memory budget
  std::optional<Expression> memory_per_gpu_bytes;   // at the model's full context
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
  std::vector<EngineArg> engine_args;  // in document order
  PathRequirements requirements;
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
  // GPU facts (gpu_facts.h), each a half-open range [at_least, below) in
  // the fact's unit: devices, capability tenths (8.9 is 89), bytes, release.
  std::optional<std::pair<uint64_t, uint64_t>> gpu_count;
  std::optional<std::pair<uint64_t, uint64_t>> gpu_capability;
  std::optional<std::pair<uint64_t, uint64_t>> gpu_memory;
  std::optional<std::pair<uint64_t, uint64_t>> l4t_major;
  std::optional<bool> mig;
};

struct Rule {
  std::string name;
  RuleMatch match;
  std::string path_id;
};

}  // namespace weightpath::policy
