#include "policy/expression.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "policy/absl_view.h"

namespace weightpath::policy {
namespace {

constexpr double kBytesLimit = 9007199254740992.0;  // 2^53, gpu_facts.h's clamp
// A bound past this is treated as a possible overflow.
constexpr double kFiniteLimit = 1e300;
constexpr size_t kMaxStringLiteralBytes = 64;
constexpr size_t kMaxStack = 64;

enum class OpKind : uint8_t {
  kNumber,
  kString,
  kVariable,
  kEarlier,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kNeg,
  kLt,
  kLe,
  kGt,
  kGe,
  kEq,
  kNe,
  kAnd,
  kOr,
  kNot,
  kMin,
  kMax,
  kFloor,
  kCeil,
  kClamp,
  kLargestDivisor,
  kIf,
};

struct Op {
  OpKind kind;
  uint8_t arity = 0;   // kMin, kMax: how many operands
  uint16_t index = 0;  // kVariable, kEarlier
  double number = 0;
  const std::string* text = nullptr;
};

double LargestDivisor(double n, double k) {
  n = std::floor(n);
  k = std::floor(k);
  if (!(n >= 1)) return 1;
  k = std::min({k, n, kMaxLargestDivisor});
  for (double d = k; d > 1; d -= 1) {
    if (std::fmod(n, d) == 0) return d;
  }
  return 1;
}

}  // namespace

struct Expression::Program {
  std::string text;
  std::vector<Op> ops;
  std::deque<std::string> literals;  // a deque: pointers to them stay valid
  ValueRange range;
  uint32_t variables_read = 0;
};

std::string_view ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kNumber:
      return "number";
    case ValueType::kBool:
      return "boolean";
    case ValueType::kString:
      return "string";
  }
  return "value";
}

const std::array<VariableInfo, kVariableCount>& Variables() {
  static const std::array<VariableInfo, kVariableCount> kVariables = {{
      {"gpu.count", ValueType::kNumber, 0, 512,
       "usable GPU devices (a MIG instance is one); 0 without a GPU"},
      {"gpu.identical_count", ValueType::kNumber, 0, 512,
       "usable devices identical to the primary one (same name, capability and memory)"},
      {"gpu.capability", ValueType::kNumber, 0, 99.9,
       "the primary device's compute capability, major + minor/10 (8.9); 0 without a GPU"},
      {"gpu.memory_total_bytes", ValueType::kNumber, 0, kBytesLimit,
       "the primary device's memory (a MIG slice's own)"},
      {"gpu.memory_free_bytes", ValueType::kNumber, 0, kBytesLimit,
       "the least free memory among the identical devices (their total where not reported)"},
      {"gpu.mig", ValueType::kBool, 0, 1, "the primary device is a MIG instance"},
      {"gpu.integrated", ValueType::kBool, 0, 1, "the primary device shares system memory"},
      {"l4t.major", ValueType::kNumber, 0, 1000, "the L4T major release (36 for R36.4.3); 0 off Jetson"},
      {"profile.supports_bf16", ValueType::kBool, 0, 1, "the accelerator computes in bf16"},
      {"profile.supports_fp16", ValueType::kBool, 0, 1, "the accelerator computes in fp16"},
      {"ram.total_bytes", ValueType::kNumber, 0, kBytesLimit, "system memory"},
      {"ram.available_bytes", ValueType::kNumber, 0, kBytesLimit, "system memory available"},
      {"model.parameters", ValueType::kNumber, 1, 1e14, "the model's parameter count (catalog)"},
      {"model.attention_heads", ValueType::kNumber, 1, 65536, "attention heads (catalog)"},
      {"model.kv_heads", ValueType::kNumber, 1, 65536, "key/value heads (catalog)"},
      {"model.layers", ValueType::kNumber, 1, 65536, "transformer layers (catalog)"},
      {"model.head_dim", ValueType::kNumber, 1, 65536, "dimension of one head (catalog)"},
      {"model.max_context", ValueType::kNumber, 1, 16777216,
       "the longest context the model takes, in tokens (catalog)"},
  }};
  return kVariables;
}

namespace {

// Recursive descent straight to postfix ops, carrying each operand's range.
class Compiler {
 public:
  Compiler(std::string_view text, const ExpressionScope& scope, Expression::Program& program)
      : text_(text), scope_(scope), program_(program) {}

  absl::StatusOr<ValueRange> Run() {
    absl::StatusOr<ValueRange> range = ParseOr();
    if (!range.ok()) return range;
    SkipSpace();
    if (at_ < text_.size()) return Error(absl::StrCat("unexpected '", std::string(1, text_[at_]), "'"));
    return range;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("expression '", AbslView(text_), "' at column ", at_ + 1, ": ", AbslView(what)));
  }

  void SkipSpace() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool Take(std::string_view token) {
    SkipSpace();
    if (text_.substr(at_, token.size()) != token) return false;
    // A word operator must not be the start of a longer name.
    if (std::isalpha(static_cast<unsigned char>(token[0])) && at_ + token.size() < text_.size()) {
      const char next = text_[at_ + token.size()];
      if (std::isalnum(static_cast<unsigned char>(next)) || next == '_' || next == '.') return false;
    }
    at_ += token.size();
    return true;
  }

  absl::Status Emit(Op op) {
    if (program_.ops.size() >= kMaxExpressionOps) {
      return Error(absl::StrCat("more than ", kMaxExpressionOps, " operations"));
    }
    program_.ops.push_back(op);
    return absl::OkStatus();
  }

  absl::Status Enter() {
    if (++depth_ > kMaxExpressionDepth) {
      return Error(absl::StrCat("nested deeper than ", kMaxExpressionDepth, " levels"));
    }
    return absl::OkStatus();
  }

  absl::Status Expect(const ValueRange& range, ValueType type, std::string_view what) const {
    if (range.type == type) return absl::OkStatus();
    return Error(absl::StrCat(AbslView(what), " needs a ", AbslView(ValueTypeName(type)), ", got a ",
                              AbslView(ValueTypeName(range.type))));
  }

  absl::StatusOr<ValueRange> Finite(ValueRange range) const {
    if (!(std::fabs(range.lo) <= kFiniteLimit) || !(std::fabs(range.hi) <= kFiniteLimit)) {
      return Error("the result can overflow for some profile");
    }
    return range;
  }

  static ValueRange Number(double lo, double hi) {
    ValueRange range;
    range.lo = lo;
    range.hi = hi;
    return range;
  }
  static ValueRange Bool() {
    ValueRange range;
    range.type = ValueType::kBool;
    range.lo = 0;
    range.hi = 1;
    return range;
  }

  absl::StatusOr<ValueRange> ParseOr() {
    absl::StatusOr<ValueRange> left = ParseAnd();
    if (!left.ok()) return left;
    while (Take("or")) {
      if (absl::Status s = Expect(*left, ValueType::kBool, "'or'"); !s.ok()) return s;
      absl::StatusOr<ValueRange> right = ParseAnd();
      if (!right.ok()) return right;
      if (absl::Status s = Expect(*right, ValueType::kBool, "'or'"); !s.ok()) return s;
      if (absl::Status s = Emit({OpKind::kOr}); !s.ok()) return s;
      left = Bool();
    }
    return left;
  }

  absl::StatusOr<ValueRange> ParseAnd() {
    absl::StatusOr<ValueRange> left = ParseNot();
    if (!left.ok()) return left;
    while (Take("and")) {
      if (absl::Status s = Expect(*left, ValueType::kBool, "'and'"); !s.ok()) return s;
      absl::StatusOr<ValueRange> right = ParseNot();
      if (!right.ok()) return right;
      if (absl::Status s = Expect(*right, ValueType::kBool, "'and'"); !s.ok()) return s;
      if (absl::Status s = Emit({OpKind::kAnd}); !s.ok()) return s;
      left = Bool();
    }
    return left;
  }

  absl::StatusOr<ValueRange> ParseNot() {
    if (Take("not")) {
      if (absl::Status s = Enter(); !s.ok()) return s;
      absl::StatusOr<ValueRange> operand = ParseNot();
      --depth_;
      if (!operand.ok()) return operand;
      if (absl::Status s = Expect(*operand, ValueType::kBool, "'not'"); !s.ok()) return s;
      if (absl::Status s = Emit({OpKind::kNot}); !s.ok()) return s;
      return Bool();
    }
    return ParseComparison();
  }

  absl::StatusOr<ValueRange> ParseComparison() {
    absl::StatusOr<ValueRange> left = ParseSum();
    if (!left.ok()) return left;
    static constexpr struct {
      std::string_view token;
      OpKind kind;
    } kComparisons[] = {{"<=", OpKind::kLe}, {">=", OpKind::kGe}, {"==", OpKind::kEq},
                        {"!=", OpKind::kNe}, {"<", OpKind::kLt},  {">", OpKind::kGt}};
    for (const auto& comparison : kComparisons) {
      if (!Take(comparison.token)) continue;
      absl::StatusOr<ValueRange> right = ParseSum();
      if (!right.ok()) return right;
      const bool equality = comparison.kind == OpKind::kEq || comparison.kind == OpKind::kNe;
      if (equality) {
        if (left->type != right->type) {
          return Error(absl::StrCat("'", AbslView(comparison.token), "' compares a ",
                                    AbslView(ValueTypeName(left->type)), " with a ",
                                    AbslView(ValueTypeName(right->type))));
        }
      } else {
        const std::string what = absl::StrCat("'", AbslView(comparison.token), "'");
        if (absl::Status s = Expect(*left, ValueType::kNumber, what); !s.ok()) return s;
        if (absl::Status s = Expect(*right, ValueType::kNumber, what); !s.ok()) return s;
      }
      if (absl::Status s = Emit({comparison.kind}); !s.ok()) return s;
      return Bool();
    }
    return left;
  }

  absl::StatusOr<ValueRange> ParseSum() {
    absl::StatusOr<ValueRange> left = ParseProduct();
    if (!left.ok()) return left;
    while (true) {
      const bool add = Take("+");
      if (!add && !Take("-")) return left;
      const std::string_view what = add ? "'+'" : "'-'";
      if (absl::Status s = Expect(*left, ValueType::kNumber, what); !s.ok()) return s;
      absl::StatusOr<ValueRange> right = ParseProduct();
      if (!right.ok()) return right;
      if (absl::Status s = Expect(*right, ValueType::kNumber, what); !s.ok()) return s;
      if (absl::Status s = Emit({add ? OpKind::kAdd : OpKind::kSub}); !s.ok()) return s;
      left = Finite(add ? Number(left->lo + right->lo, left->hi + right->hi)
                        : Number(left->lo - right->hi, left->hi - right->lo));
      if (!left.ok()) return left;
    }
  }

  absl::StatusOr<ValueRange> ParseProduct() {
    absl::StatusOr<ValueRange> left = ParseUnary();
    if (!left.ok()) return left;
    while (true) {
      const bool multiply = Take("*");
      if (!multiply && !Take("/")) return left;
      const std::string_view what = multiply ? "'*'" : "'/'";
      if (absl::Status s = Expect(*left, ValueType::kNumber, what); !s.ok()) return s;
      absl::StatusOr<ValueRange> right = ParseUnary();
      if (!right.ok()) return right;
      if (absl::Status s = Expect(*right, ValueType::kNumber, what); !s.ok()) return s;
      double corners[4];
      if (multiply) {
        corners[0] = left->lo * right->lo;
        corners[1] = left->lo * right->hi;
        corners[2] = left->hi * right->lo;
        corners[3] = left->hi * right->hi;
      } else {
        if (right->lo <= 0 && right->hi >= 0) {
          return Error(absl::StrCat("the divisor can be 0 for some profile (it ranges over [",
                                    right->lo, ", ", right->hi,
                                    "]); divide by max(..., 1) or another value that cannot be 0"));
        }
        corners[0] = left->lo / right->lo;
        corners[1] = left->lo / right->hi;
        corners[2] = left->hi / right->lo;
        corners[3] = left->hi / right->hi;
      }
      if (absl::Status s = Emit({multiply ? OpKind::kMul : OpKind::kDiv}); !s.ok()) return s;
      left = Finite(Number(*std::min_element(corners, corners + 4),
                           *std::max_element(corners, corners + 4)));
      if (!left.ok()) return left;
    }
  }

  absl::StatusOr<ValueRange> ParseUnary() {
    if (Take("-")) {
      if (absl::Status s = Enter(); !s.ok()) return s;
      absl::StatusOr<ValueRange> operand = ParseUnary();
      --depth_;
      if (!operand.ok()) return operand;
      if (absl::Status s = Expect(*operand, ValueType::kNumber, "'-'"); !s.ok()) return s;
      if (absl::Status s = Emit({OpKind::kNeg}); !s.ok()) return s;
      return Number(-operand->hi, -operand->lo);
    }
    return ParsePrimary();
  }

  // The arguments of a call, after its name and '('.
  absl::StatusOr<std::vector<ValueRange>> ParseArguments(std::string_view name) {
    std::vector<ValueRange> arguments;
    if (Take(")")) return arguments;
    while (true) {
      absl::StatusOr<ValueRange> argument = ParseOr();
      if (!argument.ok()) return argument.status();
      arguments.push_back(*std::move(argument));
      if (Take(")")) return arguments;
      if (!Take(",")) return Error(absl::StrCat("expected ',' or ')' in ", AbslView(name), "(...)"));
    }
  }

  absl::StatusOr<ValueRange> ParseCall(std::string_view name) {
    if (absl::Status s = Enter(); !s.ok()) return s;
    absl::StatusOr<std::vector<ValueRange>> arguments = ParseArguments(name);
    --depth_;
    if (!arguments.ok()) return arguments.status();
    std::vector<ValueRange>& args = *arguments;
    auto arity = [&](size_t wanted) -> absl::Status {
      if (args.size() == wanted) return absl::OkStatus();
      return Error(absl::StrCat(AbslView(name), " takes ", wanted, " arguments, got ", args.size()));
    };
    auto numbers = [&]() -> absl::Status {
      for (const ValueRange& arg : args) {
        if (absl::Status s = Expect(arg, ValueType::kNumber, absl::StrCat(AbslView(name), "()"));
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    };
    if (name == "min" || name == "max") {
      if (args.size() < 2 || args.size() > 16) {
        return Error(absl::StrCat(AbslView(name), " takes 2 to 16 arguments, got ", args.size()));
      }
      if (absl::Status s = numbers(); !s.ok()) return s;
      const bool is_min = name == "min";
      ValueRange range = args[0];
      for (const ValueRange& arg : args) {
        range.lo = is_min ? std::min(range.lo, arg.lo) : std::max(range.lo, arg.lo);
        range.hi = is_min ? std::min(range.hi, arg.hi) : std::max(range.hi, arg.hi);
      }
      Op op{is_min ? OpKind::kMin : OpKind::kMax};
      op.arity = static_cast<uint8_t>(args.size());
      if (absl::Status s = Emit(op); !s.ok()) return s;
      return range;
    }
    if (name == "floor" || name == "ceil") {
      if (absl::Status s = arity(1); !s.ok()) return s;
      if (absl::Status s = numbers(); !s.ok()) return s;
      const bool floor = name == "floor";
      if (absl::Status s = Emit({floor ? OpKind::kFloor : OpKind::kCeil}); !s.ok()) return s;
      return floor ? Number(std::floor(args[0].lo), std::floor(args[0].hi))
                   : Number(std::ceil(args[0].lo), std::ceil(args[0].hi));
    }
    if (name == "clamp") {
      if (absl::Status s = arity(3); !s.ok()) return s;
      if (absl::Status s = numbers(); !s.ok()) return s;
      if (args[1].hi > args[2].lo) {
        return Error("clamp(x, low, high) needs low <= high for every profile");
      }
      if (absl::Status s = Emit({OpKind::kClamp}); !s.ok()) return s;
      return Number(std::min(std::max(args[0].lo, args[1].lo), args[2].lo),
                    std::min(std::max(args[0].hi, args[1].hi), args[2].hi));
    }
    if (name == "largest_divisor") {
      if (absl::Status s = arity(2); !s.ok()) return s;
      if (absl::Status s = numbers(); !s.ok()) return s;
      if (absl::Status s = Emit({OpKind::kLargestDivisor}); !s.ok()) return s;
      const double hi = std::max(1.0, std::min({std::floor(args[0].hi), std::floor(args[1].hi),
                                                kMaxLargestDivisor}));
      return Number(1, hi);
    }
    if (name == "if") {
      if (absl::Status s = arity(3); !s.ok()) return s;
      if (absl::Status s = Expect(args[0], ValueType::kBool, "if()'s condition"); !s.ok()) return s;
      if (args[1].type != args[2].type) {
        return Error(absl::StrCat("if() gives a ", AbslView(ValueTypeName(args[1].type)),
                                  " or a ", AbslView(ValueTypeName(args[2].type)),
                                  "; both must be of one type"));
      }
      if (absl::Status s = Emit({OpKind::kIf}); !s.ok()) return s;
      ValueRange range = args[1];
      range.lo = std::min(args[1].lo, args[2].lo);
      range.hi = std::max(args[1].hi, args[2].hi);
      for (const std::string* text : args[2].strings) {
        if (std::find_if(range.strings.begin(), range.strings.end(), [&](const std::string* seen) {
              return *seen == *text;
            }) == range.strings.end()) {
          range.strings.push_back(text);
        }
      }
      return range;
    }
    return Error(absl::StrCat("unknown function '", AbslView(name),
                              "' (functions: min, max, floor, ceil, clamp, if, largest_divisor)"));
  }

  absl::StatusOr<ValueRange> ParseName(std::string_view name) {
    static constexpr struct {
      std::string_view name;
      double value;
    } kConstants[] = {{"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                      {"TiB", 1099511627776.0}};
    for (const auto& constant : kConstants) {
      if (name != constant.name) continue;
      Op op{OpKind::kNumber};
      op.number = constant.value;
      if (absl::Status s = Emit(op); !s.ok()) return s;
      return Number(constant.value, constant.value);
    }
    if (name == "true" || name == "false") {
      Op op{OpKind::kNumber};
      op.number = name == "true" ? 1 : 0;
      if (absl::Status s = Emit(op); !s.ok()) return s;
      ValueRange range = Bool();
      range.lo = range.hi = op.number;
      return range;
    }
    if (name == "path.bits_per_weight") {
      if (!scope_.path_bits_per_weight.has_value()) {
        return Error("path.bits_per_weight: this path gives no bits_per_weight");
      }
      Op op{OpKind::kNumber};
      op.number = *scope_.path_bits_per_weight;
      if (absl::Status s = Emit(op); !s.ok()) return s;
      return Number(op.number, op.number);
    }
    const auto& variables = Variables();
    for (size_t i = 0; i < variables.size(); ++i) {
      if (variables[i].name != name) continue;
      Op op{OpKind::kVariable};
      op.index = static_cast<uint16_t>(i);
      if (absl::Status s = Emit(op); !s.ok()) return s;
      program_.variables_read |= uint32_t{1} << i;
      ValueRange range = Number(variables[i].lo, variables[i].hi);
      range.type = variables[i].type;
      return range;
    }
    if (name.substr(0, 7) == "engine.") {
      const std::string_view arg = name.substr(7);
      for (size_t i = 0; i < scope_.earlier.size(); ++i) {
        if (scope_.earlier[i].name != arg) continue;
        Op op{OpKind::kEarlier};
        op.index = static_cast<uint16_t>(i);
        if (absl::Status s = Emit(op); !s.ok()) return s;
        return scope_.earlier[i].range;
      }
      std::vector<std::string> names;
      for (const ExpressionScope::Earlier& earlier : scope_.earlier) names.push_back(earlier.name);
      return Error(absl::StrCat("'", AbslView(name),
                                "' is not an engine argument defined earlier in this path (",
                                names.empty() ? "none is" : absl::StrJoin(names, ", "), ")"));
    }
    std::vector<std::string> names;
    for (const VariableInfo& variable : variables) names.emplace_back(variable.name);
    return Error(absl::StrCat("unknown name '", AbslView(name), "' (facts: ", absl::StrJoin(names, ", "),
                              "; path.bits_per_weight; engine.NAME; KiB, MiB, GiB, TiB)"));
  }

  absl::StatusOr<ValueRange> ParsePrimary() {
    SkipSpace();
    if (at_ >= text_.size()) return Error("unexpected end of the expression");
    const char c = text_[at_];
    if (c == '(') {
      ++at_;
      if (absl::Status s = Enter(); !s.ok()) return s;
      absl::StatusOr<ValueRange> inner = ParseOr();
      --depth_;
      if (!inner.ok()) return inner;
      if (!Take(")")) return Error("expected ')'");
      return inner;
    }
    if (c == '\'') {
      const size_t end = text_.find('\'', at_ + 1);
      if (end == std::string_view::npos) return Error("unterminated string");
      const std::string_view literal = text_.substr(at_ + 1, end - at_ - 1);
      if (literal.size() > kMaxStringLiteralBytes) {
        return Error(absl::StrCat("a string longer than ", kMaxStringLiteralBytes, " bytes"));
      }
      at_ = end + 1;
      program_.literals.emplace_back(literal);
      Op op{OpKind::kString};
      op.text = &program_.literals.back();
      if (absl::Status s = Emit(op); !s.ok()) return s;
      ValueRange range;
      range.type = ValueType::kString;
      range.strings.push_back(op.text);
      return range;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t end = at_;
      while (end < text_.size() &&
             (std::isdigit(static_cast<unsigned char>(text_[end])) || text_[end] == '.')) {
        ++end;
      }
      if (end < text_.size() && (text_[end] == 'e' || text_[end] == 'E')) {
        size_t exponent = end + 1;
        if (exponent < text_.size() && (text_[exponent] == '+' || text_[exponent] == '-')) {
          ++exponent;
        }
        if (exponent < text_.size() && std::isdigit(static_cast<unsigned char>(text_[exponent]))) {
          end = exponent;
          while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
        }
      }
      const std::string literal(text_.substr(at_, end - at_));
      char* parsed_end = nullptr;
      const double value = std::strtod(literal.c_str(), &parsed_end);
      if (parsed_end != literal.c_str() + literal.size() || !(std::fabs(value) <= kFiniteLimit)) {
        return Error(absl::StrCat("'", literal, "' is not a number"));
      }
      at_ = end;
      Op op{OpKind::kNumber};
      op.number = value;
      if (absl::Status s = Emit(op); !s.ok()) return s;
      return Number(value, value);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = at_;
      while (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) ||
                                    text_[end] == '_' || text_[end] == '.')) {
        ++end;
      }
      const std::string_view name = text_.substr(at_, end - at_);
      at_ = end;
      if (Take("(")) return ParseCall(name);
      return ParseName(name);
    }
    return Error(absl::StrCat("unexpected '", std::string(1, c), "'"));
  }

  std::string_view text_;
  const ExpressionScope& scope_;
  Expression::Program& program_;
  size_t at_ = 0;
  size_t depth_ = 0;
};

// The deepest the evaluation stack gets.
size_t StackDepth(const std::vector<Op>& ops) {
  size_t depth = 0;
  size_t deepest = 0;
  for (const Op& op : ops) {
    switch (op.kind) {
      case OpKind::kNumber:
      case OpKind::kString:
      case OpKind::kVariable:
      case OpKind::kEarlier:
        ++depth;
        break;
      case OpKind::kNeg:
      case OpKind::kNot:
      case OpKind::kFloor:
      case OpKind::kCeil:
        break;
      case OpKind::kMin:
      case OpKind::kMax:
        depth -= op.arity - 1u;
        break;
      case OpKind::kClamp:
      case OpKind::kIf:
        depth -= 2;
        break;
      default:
        depth -= 1;
        break;
    }
    deepest = std::max(deepest, depth);
  }
  return deepest;
}

}  // namespace

absl::StatusOr<Expression> Expression::Compile(std::string_view text,
                                               const ExpressionScope& scope) {
  if (text.size() > kMaxExpressionBytes) {
    return absl::InvalidArgumentError(absl::StrCat("an expression of ", text.size(),
                                                   " bytes; at most ", kMaxExpressionBytes));
  }
  auto program = std::make_shared<Program>();
  program->text = std::string(text);
  Compiler compiler(program->text, scope, *program);
  absl::StatusOr<ValueRange> range = compiler.Run();
  if (!range.ok()) return range.status();
  if (StackDepth(program->ops) > kMaxStack) {
    return absl::InvalidArgumentError(
        absl::StrCat("expression '", AbslView(text), "' holds more than ", kMaxStack,
                     " values at once"));
  }
  program->range = *std::move(range);
  Expression expression;
  expression.program_ = std::move(program);
  return expression;
}

const ValueRange& Expression::range() const { return program_->range; }
const std::string& Expression::text() const { return program_->text; }
uint32_t Expression::variables_read() const { return program_->variables_read; }

ExprValue Expression::Evaluate(const ExpressionInputs& inputs) const {
  std::array<ExprValue, kMaxStack> stack;
  size_t top = 0;  // stack[top - 1] is the top
  bool known = true;
  auto number = [](double value) {
    ExprValue result;
    result.number = value;
    return result;
  };
  auto boolean = [](bool value) {
    ExprValue result;
    result.type = ValueType::kBool;
    result.number = value ? 1 : 0;
    return result;
  };
  for (const Op& op : program_->ops) {
    switch (op.kind) {
      case OpKind::kNumber:
        stack[top++] = number(op.number);
        break;
      case OpKind::kString: {
        ExprValue value;
        value.type = ValueType::kString;
        value.text = op.text;
        stack[top++] = value;
        break;
      }
      case OpKind::kVariable: {
        ExprValue value = number(inputs.values[op.index]);
        value.type = Variables()[op.index].type;
        if ((inputs.known & (uint32_t{1} << op.index)) == 0) known = false;
        stack[top++] = value;
        break;
      }
      case OpKind::kEarlier: {
        ExprValue value;
        if (op.index < inputs.earlier_count) {
          value = inputs.earlier[op.index];
        } else {
          value.known = false;
        }
        if (!value.known) known = false;
        stack[top++] = value;
        break;
      }
      case OpKind::kNeg:
        stack[top - 1].number = -stack[top - 1].number;
        break;
      case OpKind::kNot:
        stack[top - 1] = boolean(stack[top - 1].number == 0);
        break;
      case OpKind::kFloor:
        stack[top - 1].number = std::floor(stack[top - 1].number);
        break;
      case OpKind::kCeil:
        stack[top - 1].number = std::ceil(stack[top - 1].number);
        break;
      case OpKind::kMin:
      case OpKind::kMax: {
        const size_t first = top - op.arity;
        double result = stack[first].number;
        for (size_t i = first + 1; i < top; ++i) {
          result = op.kind == OpKind::kMin ? std::min(result, stack[i].number)
                                           : std::max(result, stack[i].number);
        }
        top = first;
        stack[top++] = number(result);
        break;
      }
      case OpKind::kClamp: {
        const double value = std::min(std::max(stack[top - 3].number, stack[top - 2].number),
                                      stack[top - 1].number);
        top -= 3;
        stack[top++] = number(value);
        break;
      }
      case OpKind::kIf: {
        const ExprValue chosen = stack[top - 3].number != 0 ? stack[top - 2] : stack[top - 1];
        top -= 3;
        stack[top++] = chosen;
        break;
      }
      default: {
        const ExprValue right = stack[--top];
        const ExprValue left = stack[top - 1];
        ExprValue& out = stack[top - 1];
        const double a = left.number;
        const double b = right.number;
        switch (op.kind) {
          case OpKind::kAdd:
            out = number(a + b);
            break;
          case OpKind::kSub:
            out = number(a - b);
            break;
          case OpKind::kMul:
            out = number(a * b);
            break;
          case OpKind::kDiv:
            out = number(a / b);  // the divisor's range excludes 0
            break;
          case OpKind::kLt:
            out = boolean(a < b);
            break;
          case OpKind::kLe:
            out = boolean(a <= b);
            break;
          case OpKind::kGt:
            out = boolean(a > b);
            break;
          case OpKind::kGe:
            out = boolean(a >= b);
            break;
          case OpKind::kEq:
          case OpKind::kNe: {
            bool equal = left.type == ValueType::kString
                             ? (left.text != nullptr && right.text != nullptr && *left.text == *right.text)
                             : a == b;
            out = boolean(op.kind == OpKind::kEq ? equal : !equal);
            break;
          }
          case OpKind::kAnd:
            out = boolean(a != 0 && b != 0);
            break;
          case OpKind::kOr:
            out = boolean(a != 0 || b != 0);
            break;
          case OpKind::kLargestDivisor:
            out = number(LargestDivisor(a, b));
            break;
          default:
            break;
        }
        break;
      }
    }
  }
  ExprValue result = top > 0 ? stack[top - 1] : ExprValue{};
  result.known = known;
  return result;
}

}  // namespace weightpath::policy
