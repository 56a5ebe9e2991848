// The policy's expression language: engine arguments and path requirements
// derived from the profile and the model, written in the policy document
// (policy/README.md, "Expressions"). Small, bounded and total:
//
//   * numbers (doubles), booleans and string literals; + - * /, comparisons,
//     and/or/not, and the functions min, max, floor, ceil, clamp, if and
//     largest_divisor; named facts of the device, the model and the path;
//   * at most kMaxExpressionBytes of text, kMaxExpressionOps operations and
//     kMaxExpressionDepth levels of nesting;
//   * checked at load for every profile at once: each fact has a known
//     range, and the ranges are carried through every operation (interval
//     arithmetic), so a divisor that could be 0, a result that could
//     overflow, or an argument outside what the engine accepts is refused
//     with the document's file:line before the policy serves. Evaluation
//     itself cannot fail; a model fact the catalog does not give makes the
//     result unknown (the argument is left out), never wrong.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace weightpath::policy {

inline constexpr size_t kMaxExpressionBytes = 1024;
inline constexpr size_t kMaxExpressionOps = 256;
inline constexpr size_t kMaxExpressionDepth = 32;
// largest_divisor(n, k) tries at most this many candidates.
inline constexpr double kMaxLargestDivisor = 1024;

enum class ValueType : uint8_t { kNumber, kBool, kString };
std::string_view ValueTypeName(ValueType type);

// The facts an expression may read, by slot.
enum class Variable : uint8_t {
  kGpuCount,
  kGpuIdenticalCount,
  kGpuCapability,
  kGpuMemoryTotalBytes,
  kGpuMemoryFreeBytes,
  kGpuMig,
  kGpuIntegrated,
  kL4tMajor,
  kSupportsBf16,
  kSupportsFp16,
  kRamTotalBytes,
  kRamAvailableBytes,
  kModelParameters,
  kModelAttentionHeads,
  kModelKvHeads,
  kModelLayers,
  kModelHeadDim,
  kModelMaxContext,
};
inline constexpr size_t kVariableCount = static_cast<size_t>(Variable::kModelMaxContext) + 1;

struct VariableInfo {
  std::string_view name;  // as written in an expression, e.g. "gpu.count"
  ValueType type;
  double lo;              // the range every profile's value lies in
  double hi;
  std::string_view meaning;
};
const std::array<VariableInfo, kVariableCount>& Variables();

// One value; `text` points into the literals of the expression that made
// it (alive as long as the policy).
struct ExprValue {
  ValueType type = ValueType::kNumber;
  bool known = true;
  double number = 0;  // bools are 0 or 1
  const std::string* text = nullptr;
};

// One evaluation's facts. `known` has bit i set when Variables()[i] is
// given (a model fact the catalog lacks is not); `earlier` are the values
// of the engine arguments defined before this one, by position.
struct ExpressionInputs {
  std::array<double, kVariableCount> values{};
  uint32_t known = 0;
  const ExprValue* earlier = nullptr;
  size_t earlier_count = 0;
};

// What a compiled expression is known to produce, over every profile.
struct ValueRange {
  ValueType type = ValueType::kNumber;
  double lo = 0;
  double hi = 0;
  std::vector<const std::string*> strings;  // a string's possible values
};

// Names an expression may use besides Variables(): the engine arguments
// defined before it (`engine.NAME`) and constants of the path.
struct ExpressionScope {
  struct Earlier {
    std::string name;
    ValueRange range;
  };
  std::vector<Earlier> earlier;
  std::optional<double> path_bits_per_weight;
};

class Expression {
 public:
  // INVALID_ARGUMENT with what is wrong and where in the text (column);
  // the caller adds the document's file:line.
  static absl::StatusOr<Expression> Compile(std::string_view text, const ExpressionScope& scope);

  // Allocation-free; never fails.
  ExprValue Evaluate(const ExpressionInputs& inputs) const;

  const ValueRange& range() const;
  const std::string& text() const;
  // Bit i set: reads Variables()[i].
  uint32_t variables_read() const;

  // The compiled form (expression.cc); shared, so that copies are cheap and
  // the strings a ExprValue points at outlive every copy.
  struct Program;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace weightpath::policy
