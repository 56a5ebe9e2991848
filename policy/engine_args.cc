#include "policy/engine_args.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "policy/absl_view.h"
#include "policy/policy.h"

namespace weightpath::policy {
namespace {

constexpr double kBytesLimit = 9007199254740992.0;  // 2^53

size_t VariableSlot(Variable variable) { return static_cast<size_t>(variable); }

void Set(ExpressionInputs& inputs, Variable variable, double value) {
  inputs.values[VariableSlot(variable)] = value;
  inputs.known |= uint32_t{1} << VariableSlot(variable);
}

void SetModel(ExpressionInputs& inputs, Variable variable, const std::optional<uint64_t>& fact) {
  if (!fact.has_value()) return;
  const VariableInfo& info = Variables()[VariableSlot(variable)];
  // The catalog checks the ranges; a caller that did not is clamped, so the
  // load-time proofs still hold.
  Set(inputs, variable, std::clamp(static_cast<double>(*fact), info.lo, info.hi));
}

double Bytes(uint64_t bytes) { return std::min(static_cast<double>(bytes), kBytesLimit); }

std::string GiB(double bytes) { return absl::StrFormat("%.1f GiB", bytes / 1073741824.0); }

std::string CapabilityWords(uint32_t tenths) {
  return absl::StrCat(tenths / 10, ".", tenths % 10);
}

// The model facts an expression read that the catalog does not give.
std::string MissingFacts(uint32_t read, uint32_t known) {
  std::vector<std::string> names;
  for (size_t i = 0; i < kVariableCount; ++i) {
    const uint32_t bit = uint32_t{1} << i;
    if ((read & bit) != 0 && (known & bit) == 0) names.emplace_back(Variables()[i].name);
  }
  return absl::StrJoin(names, ", ");
}

}  // namespace

const std::vector<EngineArgKind>& EngineArgKinds() {
  static const std::vector<EngineArgKind> kKinds = {
      {"tensor_parallel_size", ValueType::kNumber, true, 1, false, 512, {}},
      {"pipeline_parallel_size", ValueType::kNumber, true, 1, false, 512, {}},
      {"max_model_len", ValueType::kNumber, true, -1e300, false, 1e300, {}},
      {"max_num_seqs", ValueType::kNumber, true, 1, false, 65536, {}},
      {"gpu_memory_utilization", ValueType::kNumber, false, 0, true, 1, {}},
      {"dtype", ValueType::kString, false, 0, false, 0,
       {"auto", "half", "float16", "bfloat16", "float", "float32"}},
      {"kv_cache_dtype", ValueType::kString, false, 0, false, 0,
       {"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}},
      {"enforce_eager", ValueType::kBool, false, 0, false, 1, {}},
  };
  return kKinds;
}

absl::Status CheckEngineArg(std::string_view name, const ValueRange& range) {
  const EngineArgKind* kind = nullptr;
  for (const EngineArgKind& candidate : EngineArgKinds()) {
    if (candidate.name == name) kind = &candidate;
  }
  if (kind == nullptr) {
    std::vector<std::string> names;
    for (const EngineArgKind& candidate : EngineArgKinds()) names.emplace_back(candidate.name);
    const std::string hint = name == "quantization"
                                 ? std::string(" (quantization is the path's own field)")
                                 : std::string();
    return absl::InvalidArgumentError(absl::StrCat("unknown engine argument '", AbslView(name), "'",
                                                   hint, "; allowed: ", absl::StrJoin(names, ", ")));
  }
  if (range.type != kind->type) {
    return absl::InvalidArgumentError(absl::StrCat(
        AbslView(name), " must be a ", AbslView(ValueTypeName(kind->type)), "; the expression gives a ",
        AbslView(ValueTypeName(range.type))));
  }
  if (kind->type == ValueType::kNumber) {
    const bool low_ok = kind->lo_exclusive ? range.lo > kind->lo : range.lo >= kind->lo;
    if (!low_ok || range.hi > kind->hi) {
      return absl::InvalidArgumentError(absl::StrCat(
          AbslView(name), " must lie in ", kind->lo_exclusive ? "(" : "[", kind->lo, ", ", kind->hi,
          "] for every profile; the expression ranges over [", range.lo, ", ", range.hi,
          "] (bound it with clamp, min or max)"));
    }
  }
  if (kind->type == ValueType::kString) {
    for (const std::string* text : range.strings) {
      if (std::find(kind->allowed.begin(), kind->allowed.end(), *text) == kind->allowed.end()) {
        std::vector<std::string> allowed(kind->allowed.begin(), kind->allowed.end());
        return absl::InvalidArgumentError(absl::StrCat(AbslView(name), " can be '", *text,
                                                       "', which is not one of ",
                                                       absl::StrJoin(allowed, ", ")));
      }
    }
  }
  return absl::OkStatus();
}

ExpressionInputs InputsFor(const v1::HardwareProfile& profile, const GpuFacts& gpu,
                           const ModelFacts& model) {
  ExpressionInputs inputs;
  Set(inputs, Variable::kGpuCount, gpu.count);
  Set(inputs, Variable::kGpuIdenticalCount, gpu.identical_count);
  Set(inputs, Variable::kGpuCapability, gpu.capability_tenths / 10.0);
  Set(inputs, Variable::kGpuMemoryTotalBytes, Bytes(gpu.memory_total_bytes));
  Set(inputs, Variable::kGpuMemoryFreeBytes, Bytes(gpu.memory_free_bytes));
  Set(inputs, Variable::kGpuMig, gpu.mig ? 1 : 0);
  Set(inputs, Variable::kGpuIntegrated, gpu.integrated ? 1 : 0);
  Set(inputs, Variable::kL4tMajor, gpu.l4t_major);
  Set(inputs, Variable::kSupportsBf16, profile.supports_bf16() ? 1 : 0);
  Set(inputs, Variable::kSupportsFp16, profile.supports_fp16() ? 1 : 0);
  Set(inputs, Variable::kRamTotalBytes, Bytes(profile.ram_total_bytes()));
  Set(inputs, Variable::kRamAvailableBytes, Bytes(profile.ram_available_bytes()));
  SetModel(inputs, Variable::kModelParameters, model.parameters);
  SetModel(inputs, Variable::kModelAttentionHeads, model.attention_heads);
  SetModel(inputs, Variable::kModelKvHeads, model.kv_heads);
  SetModel(inputs, Variable::kModelLayers, model.layers);
  SetModel(inputs, Variable::kModelHeadDim, model.head_dim);
  SetModel(inputs, Variable::kModelMaxContext, model.max_context);
  return inputs;
}

DerivedEngineArgs DeriveEngineArgs(const PathDefinition& path, const ExpressionInputs& inputs) {
  DerivedEngineArgs derived;
  ExpressionInputs scoped = inputs;
  scoped.earlier = derived.values.data();
  for (const EngineArg& arg : path.engine_args) {
    if (derived.count == kMaxEngineArgs) break;  // the loader allows no more
    scoped.earlier_count = derived.count;
    derived.values[derived.count++] = arg.expression.Evaluate(scoped);
  }
  return derived;
}

void FillEngineKwargs(const PathDefinition& path, const v1::HardwareProfile& profile,
                      const ModelFacts& model, google::protobuf::Struct* out) {
  FillEngineKwargs(path, out);
  if (!DerivesEngineArgs(path)) return;
  const DerivedEngineArgs derived =
      DeriveEngineArgs(path, InputsFor(profile, GpuFactsOf(profile), model));
  for (size_t i = 0; i < derived.count; ++i) {
    const ExprValue& value = derived.values[i];
    if (!value.known) continue;
    const std::string& name = path.engine_args[i].name;
    google::protobuf::Value& field = (*out->mutable_fields())[name];
    switch (value.type) {
      case ValueType::kString:
        field.set_string_value(value.text != nullptr ? *value.text : std::string());
        break;
      case ValueType::kBool:
        field.set_bool_value(value.number != 0);
        break;
      case ValueType::kNumber: {
        bool integer = false;
        for (const EngineArgKind& kind : EngineArgKinds()) {
          if (kind.name == name) integer = kind.integer;
        }
        const double number = integer ? std::floor(value.number) : value.number;
        if (name == "max_model_len" && number < 1) {
          out->mutable_fields()->erase(name);  // no context fits: the engine's own default fails too
          break;
        }
        field.set_number_value(number);
        break;
      }
    }
  }
}

PathFit JudgeFit(const PathDefinition& path, const v1::HardwareProfile& profile,
                 const ModelFacts& model) {
  PathFit fit;
  const PathRequirements& needs = path.requirements;
  const GpuFacts gpu = GpuFactsOf(profile);
  auto fail = [&fit](std::string requirement, std::string reason) {
    fit.kind = FitKind::kIncompatible;
    fit.requirement = std::move(requirement);
    fit.reason = std::move(reason);
    return fit;
  };
  if (needs.gpus.has_value() && gpu.identical_count < *needs.gpus) {
    return fail("requires.gpus",
                absl::StrCat("needs ", *needs.gpus, " identical usable GPUs; this device has ",
                             gpu.identical_count));
  }
  if (needs.gpu_capability_tenths.has_value() &&
      gpu.capability_tenths < *needs.gpu_capability_tenths) {
    return fail("requires.gpu_capability",
                absl::StrCat("needs GPU compute capability ",
                             CapabilityWords(*needs.gpu_capability_tenths),
                             " or newer; this device has ",
                             gpu.count == 0 ? std::string("no usable GPU")
                                            : CapabilityWords(gpu.capability_tenths)));
  }
  if (needs.l4t_major.has_value() && gpu.l4t_major < *needs.l4t_major) {
    return fail("requires.l4t_major",
                absl::StrCat("needs L4T R", *needs.l4t_major, " or newer; this device has ",
                             gpu.l4t_major == 0 ? std::string("no L4T release")
                                                : absl::StrCat("R", gpu.l4t_major)));
  }
  if (!needs.weights_per_gpu_bytes.has_value() && !needs.memory_per_gpu_bytes.has_value()) {
    return fit;
  }

  const ExpressionInputs inputs = InputsFor(profile, gpu, model);
  const DerivedEngineArgs derived = DeriveEngineArgs(path, inputs);
  ExpressionInputs scoped = inputs;
  scoped.earlier = derived.values.data();
  scoped.earlier_count = derived.count;
  double budget = Bytes(gpu.memory_free_bytes);
  std::string budget_words = "free";
  for (size_t i = 0; i < derived.count; ++i) {
    if (path.engine_args[i].name == "gpu_memory_utilization" && derived.values[i].known) {
      budget = derived.values[i].number * Bytes(gpu.memory_total_bytes);
      budget_words = absl::StrFormat("%.2f x %s", derived.values[i].number,
                                     GiB(Bytes(gpu.memory_total_bytes)));
    }
    if (path.engine_args[i].name == "max_model_len" && derived.values[i].known) {
      fit.max_model_len =
          static_cast<uint64_t>(std::max(0.0, std::floor(derived.values[i].number)));
    }
  }
  fit.memory_budget_per_gpu_bytes = static_cast<uint64_t>(budget);

  if (needs.weights_per_gpu_bytes.has_value()) {
    const ExprValue weights = needs.weights_per_gpu_bytes->Evaluate(scoped);
    if (!weights.known) {
      fit.reason = absl::StrCat("weights not judged: the catalog gives no ",
                                MissingFacts(needs.weights_per_gpu_bytes->variables_read(),
                                             inputs.known),
                                " for this model");
    } else if (weights.number > budget) {
      return fail("requires.weights_per_gpu",
                  absl::StrCat("the weights need ", GiB(weights.number),
                               " per GPU; the budget is ", GiB(budget), " (", budget_words, ")"));
    }
  }
  if (needs.memory_per_gpu_bytes.has_value()) {
    const ExprValue memory = needs.memory_per_gpu_bytes->Evaluate(scoped);
    if (!memory.known) {
      absl::StrAppend(&fit.reason, fit.reason.empty() ? "" : "; ",
                      "memory not judged: the catalog gives no ",
                      MissingFacts(needs.memory_per_gpu_bytes->variables_read(), inputs.known),
                      " for this model");
      return fit;
    }
    fit.memory_per_gpu_bytes = static_cast<uint64_t>(std::max(0.0, memory.number));
    if (memory.number > budget) {
      fit.kind = FitKind::kLowMemory;
      fit.requirement = "requires.memory_per_gpu";
      fit.reason = absl::StrCat("the model's full context needs ", GiB(memory.number),
                                " per GPU; the budget is ", GiB(budget), " (", budget_words, ")");
      if (fit.max_model_len.has_value()) {
        absl::StrAppend(&fit.reason, "; a context of ", *fit.max_model_len, " tokens fits");
      }
    }
  }
  return fit;
}

}  // namespace weightpath::policy
