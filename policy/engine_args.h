// Engine arguments a path derives from the device and the model, and the
// path's requirements judged for one device: what the policy document
// writes as expressions (expression.h), evaluated here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/struct.pb.h"
#include "policy/gpu_facts.h"
#include "policy/model_facts.h"
#include "policy/policy_types.h"

namespace weightpath::policy {

// The vLLM arguments a policy may derive, and what each must be for every
// profile (checked at load on the expression's range).
struct EngineArgKind {
  std::string_view name;
  ValueType type;
  bool integer;       // emitted rounded down
  double lo;          // numbers: every value at least this...
  bool lo_exclusive;  // ...or above it
  double hi;          // ...and at most this
  std::vector<std::string_view> allowed;  // strings: every value one of these
};
const std::vector<EngineArgKind>& EngineArgKinds();
inline constexpr size_t kMaxEngineArgs = 8;

// OK when an expression of `range` can be the argument `name` for every
// profile; else INVALID_ARGUMENT saying why (without the location).
absl::Status CheckEngineArg(std::string_view name, const ValueRange& range);

// The facts of one device and model, as the expressions read them.
ExpressionInputs InputsFor(const v1::HardwareProfile& profile, const GpuFacts& gpu,
                           const ModelFacts& model);

struct DerivedEngineArgs {
  std::array<ExprValue, kMaxEngineArgs> values{};  // parallel to the path's engine_args
  size_t count = 0;
};
// Allocation-free. An argument reading a model fact the catalog lacks is
// unknown (values[i].known false) and left out of the engine's arguments.
DerivedEngineArgs DeriveEngineArgs(const PathDefinition& path, const ExpressionInputs& inputs);

// Whether FillEngineKwargs below reads the profile and the model for
// `path`: it runs in vLLM and declares engine_args. Otherwise its engine
// kwargs are the profile-less FillEngineKwargs(path, out)'s (policy.h).
inline bool DerivesEngineArgs(const PathDefinition& path) {
  return path.runs_in_vllm && !path.engine_args.empty();
}

// {"quantization": q} when the path runs in vLLM and quantizes, then each
// derived argument that is known (an integer kind rounded down;
// max_model_len only when at least 1).
void FillEngineKwargs(const PathDefinition& path, const v1::HardwareProfile& profile,
                      const ModelFacts& model, google::protobuf::Struct* out);

// NVIDIA NIM's three groups: runs here; runs, but the memory budget per GPU
// holds less than the model's full context; cannot run (a requirement
// fails).
enum class FitKind { kRunnable, kLowMemory, kIncompatible };

struct PathFit {
  FitKind kind = FitKind::kRunnable;
  std::string requirement;  // "requires.gpus", ...; empty when runnable
  std::string reason;       // in words; may note what was not judged
  std::optional<uint64_t> memory_per_gpu_bytes;         // needed at the full context
  std::optional<uint64_t> memory_budget_per_gpu_bytes;  // what a GPU gives the engine
  std::optional<uint64_t> max_model_len;                // the context that fits
};
// The memory budget per GPU is gpu_memory_utilization x the primary
// device's memory where the path derives gpu_memory_utilization, else its
// free memory.
PathFit JudgeFit(const PathDefinition& path, const v1::HardwareProfile& profile,
                 const ModelFacts& model);

}  // namespace weightpath::policy
