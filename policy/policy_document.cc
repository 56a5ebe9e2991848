#include "policy/policy_document.h"

#include <cmath>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/bounded_yaml.h"
#include "common/strict_yaml.h"
#include "common/status_macros.h"
#include "policy/cpu_model.h"
#include "policy/engine_args.h"
#include "policy/policy_limits.h"

namespace weightpath::policy {
namespace {

constexpr uint32_t kSchemaVersion = 1;

absl::StatusOr<v1::Priority> ParseRulePriority(absl::string_view text) {
  std::string lowered = absl::AsciiStrToLower(text);
  if (lowered == "speed") return v1::PRIORITY_SPEED;
  if (lowered == "fidelity") return v1::PRIORITY_FIDELITY;
  return absl::InvalidArgumentError(
      absl::StrCat("priority '", text, "' is not one of speed, fidelity"));
}

absl::StatusOr<ExpectedFigures> ReadExpected(const yaml::Reader& reader, const YAML::Node& node,
                                             const std::string& field) {
  ASSIGN_OR_RETURN(yaml::Map map,
                   yaml::Map::Read(reader, node, field,
                                 {"cpu_model", "cpu_model_aliases", "threads", "model",
                                  "condition", "decode_tok_s",
                                  "prefill_vs_llama_cpp", "gemm_ms_per_step", "step_ms",
                                  "fidelity_exact_matches", "fidelity_prompts"}));
  ExpectedFigures figures;
  for (const yaml::Entry& entry : map.entries()) {
    if (entry.key == "cpu_model") {
      ASSIGN_OR_RETURN(figures.cpu_model, yaml::ReadString(reader, entry));
    } else if (entry.key == "cpu_model_aliases") {
      ASSIGN_OR_RETURN(const std::vector<yaml::Entry> items,
                       yaml::ReadList(reader, entry, "a list of CPU model names or patterns"));
      if (items.size() > kMaxCpuModelAliases) {
        return yaml::Fault(reader, entry,
                           absl::StrCat(items.size(), " aliases; at most ", kMaxCpuModelAliases));
      }
      for (const yaml::Entry& item : items) {
        ASSIGN_OR_RETURN(std::string alias, yaml::ReadString(reader, item));
        if (alias.size() > kMaxCpuModelAliasBytes) {
          return yaml::Fault(reader, item, absl::StrCat(alias.size(), " bytes; at most ",
                                                        kMaxCpuModelAliasBytes));
        }
        // A pattern of nothing but '*' would judge every CPU by this figure.
        if (NormalizeCpuModel(alias).find_first_not_of('*') == std::string::npos) {
          return yaml::Fault(reader, item,
                             "names no CPU once normalised (lower case, without (R), (TM), "
                             "CPU, Processor and the clock)");
        }
        figures.cpu_model_aliases.push_back(std::move(alias));
      }
    } else if (entry.key == "threads") {
      ASSIGN_OR_RETURN(figures.threads, yaml::ReadUint32(reader, entry));
    } else if (entry.key == "model") {
      ASSIGN_OR_RETURN(figures.model, yaml::ReadString(reader, entry));
    } else if (entry.key == "condition") {
      ASSIGN_OR_RETURN(figures.condition, yaml::ReadString(reader, entry));
    } else if (entry.key == "decode_tok_s") {
      ASSIGN_OR_RETURN(figures.decode_tok_s, yaml::ReadDouble(reader, entry));
    } else if (entry.key == "prefill_vs_llama_cpp") {
      ASSIGN_OR_RETURN(figures.prefill_vs_llama_cpp, yaml::ReadDouble(reader, entry));
    } else if (entry.key == "gemm_ms_per_step") {
      ASSIGN_OR_RETURN(figures.gemm_ms_per_step, yaml::ReadDouble(reader, entry));
    } else if (entry.key == "step_ms") {
      ASSIGN_OR_RETURN(figures.step_ms, yaml::ReadDouble(reader, entry));
    } else if (entry.key == "fidelity_exact_matches") {
      ASSIGN_OR_RETURN(figures.fidelity_exact_matches, yaml::ReadUint32(reader, entry));
    } else if (entry.key == "fidelity_prompts") {
      ASSIGN_OR_RETURN(figures.fidelity_prompts, yaml::ReadUint32(reader, entry));
    }
  }
  if (!figures.cpu_model_aliases.empty() && NormalizeCpuModel(figures.cpu_model).empty()) {
    return reader.Fault(node, absl::StrCat(field, ".cpu_model_aliases"),
                        "needs the cpu_model it gives other names of");
  }
  if (figures.fidelity_exact_matches.has_value() != figures.fidelity_prompts.has_value()) {
    return reader.Fault(node, field,
                        "fidelity_exact_matches and fidelity_prompts must be given together");
  }
  if (figures.fidelity_prompts.has_value() &&
      *figures.fidelity_exact_matches > *figures.fidelity_prompts) {
    return reader.Fault(node, absl::StrCat(field, ".fidelity_exact_matches"),
                        "exceeds fidelity_prompts");
  }
  return figures;
}

// A compute capability as written, 8.9 or 12.1: tenths, so 8.9 is 89.
absl::StatusOr<uint32_t> ReadCapabilityTenths(const yaml::Reader& reader,
                                              const yaml::Entry& entry) {
  ASSIGN_OR_RETURN(const double value, yaml::ReadDouble(reader, entry));
  const double tenths = std::round(value * 10);
  if (value < 0 || value > 99.9 || std::fabs(value * 10 - tenths) > 1e-6) {
    return yaml::Fault(reader, entry,
                       "expected a compute capability major.minor, e.g. 8.9 (0 to 99.9, one "
                       "digit after the point)");
  }
  return static_cast<uint32_t>(tenths);
}

absl::StatusOr<Expression> ReadExpression(const yaml::Reader& reader, const yaml::Entry& entry,
                                          const ExpressionScope& scope) {
  ASSIGN_OR_RETURN(const std::string text,
                   yaml::ReadScalar(reader, entry, "an expression (policy/README.md)"));
  absl::StatusOr<Expression> expression = Expression::Compile(text, scope);
  if (!expression.ok()) return yaml::Fault(reader, entry, expression.status().message());
  return expression;
}

// engine_args: {NAME: EXPRESSION, ...}, in order; each may read the ones
// before it as engine.NAME.
absl::StatusOr<std::vector<EngineArg>> ReadEngineArgs(const yaml::Reader& reader,
                                                      const yaml::Entry& entry,
                                                      ExpressionScope& scope) {
  if (!entry.value.IsMap()) {
    return yaml::Fault(reader, entry, "expected a mapping of engine argument to expression");
  }
  ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::ReadAnyKeys(reader, entry));
  if (map.entries().size() > kMaxEngineArgs) {
    return yaml::Fault(reader, entry,
                       absl::StrCat(map.entries().size(), " engine arguments; at most ",
                                    kMaxEngineArgs));
  }
  std::vector<EngineArg> args;
  for (const yaml::Entry& arg_entry : map.entries()) {
    ASSIGN_OR_RETURN(Expression expression, ReadExpression(reader, arg_entry, scope));
    absl::Status allowed = CheckEngineArg(arg_entry.key, expression.range());
    if (!allowed.ok()) return yaml::Fault(reader, arg_entry, allowed.message());
    scope.earlier.push_back({arg_entry.key, expression.range()});
    EngineArg arg;
    arg.name = arg_entry.key;
    arg.expression = std::move(expression);
    const YAML::Mark mark = arg_entry.value.Mark().is_null() ? arg_entry.key_mark
                                                             : arg_entry.value.Mark();
    arg.location = absl::StrCat(reader.source_name(), ":", mark.line + 1);
    args.push_back(std::move(arg));
  }
  return args;
}

absl::StatusOr<PathRequirements> ReadRequirements(const yaml::Reader& reader,
                                                  const yaml::Entry& entry,
                                                  const ExpressionScope& scope) {
  ASSIGN_OR_RETURN(const yaml::Map map,
                   yaml::Map::Read(reader, entry,
                                   {"gpus", "gpu_capability", "l4t_major", "weights_per_gpu",
                                    "memory_per_gpu"}));
  PathRequirements needs;
  for (const yaml::Entry& item : map.entries()) {
    if (item.key == "gpus") {
      ASSIGN_OR_RETURN(needs.gpus, yaml::ReadUint32(reader, item));
    } else if (item.key == "gpu_capability") {
      ASSIGN_OR_RETURN(needs.gpu_capability_tenths, ReadCapabilityTenths(reader, item));
    } else if (item.key == "l4t_major") {
      ASSIGN_OR_RETURN(needs.l4t_major, yaml::ReadUint32(reader, item));
    } else {
      ASSIGN_OR_RETURN(Expression expression, ReadExpression(reader, item, scope));
      if (expression.range().type != ValueType::kNumber) {
        return yaml::Fault(reader, item, "must be a number of bytes");
      }
      if (item.key == "weights_per_gpu") {
        needs.weights_per_gpu_bytes = std::move(expression);
      } else {
        needs.memory_per_gpu_bytes = std::move(expression);
      }
    }
  }
  return needs;
}

absl::StatusOr<PathDefinition> ReadPath(const yaml::Reader& reader, const YAML::Node& node,
                                        const std::string& field) {
  ASSIGN_OR_RETURN(yaml::Map map, yaml::Map::Read(reader, node, field,
                                              {"id", "name", "quantization", "group_size",
                                               "bits_per_weight", "fused_cpu_norms",
                                               "runs_in_vllm", "verified", "rationale",
                                               "build_with", "notes", "expected",
                                               "engine_args", "requires"}));
  PathDefinition path;
  for (const yaml::Entry& entry : map.entries()) {
    if (entry.key == "engine_args" || entry.key == "requires") continue;  // below
    if (entry.key == "id") {
      ASSIGN_OR_RETURN(path.id, yaml::ReadString(reader, entry));
    } else if (entry.key == "name") {
      ASSIGN_OR_RETURN(path.name, yaml::ReadString(reader, entry));
    } else if (entry.key == "quantization") {
      ASSIGN_OR_RETURN(path.quantization, yaml::ReadString(reader, entry));
    } else if (entry.key == "group_size") {
      ASSIGN_OR_RETURN(path.group_size, yaml::ReadUint32(reader, entry));
      if (*path.group_size == 0) return yaml::Fault(reader, entry, "must be positive");
    } else if (entry.key == "bits_per_weight") {
      ASSIGN_OR_RETURN(path.bits_per_weight, yaml::ReadDouble(reader, entry));
      if (*path.bits_per_weight <= 0) return yaml::Fault(reader, entry, "must be positive");
    } else if (entry.key == "fused_cpu_norms") {
      ASSIGN_OR_RETURN(path.fused_cpu_norms, yaml::ReadBool(reader, entry));
    } else if (entry.key == "runs_in_vllm") {
      ASSIGN_OR_RETURN(path.runs_in_vllm, yaml::ReadBool(reader, entry));
    } else if (entry.key == "verified") {
      ASSIGN_OR_RETURN(path.verified, yaml::ReadBool(reader, entry));
    } else if (entry.key == "rationale") {
      ASSIGN_OR_RETURN(path.rationale, yaml::ReadString(reader, entry));
    } else if (entry.key == "build_with") {
      ASSIGN_OR_RETURN(path.build_with, yaml::ReadString(reader, entry));
    } else if (entry.key == "notes") {
      ASSIGN_OR_RETURN(path.notes, yaml::ReadStringList(reader, entry));
    } else if (entry.key == "expected") {
      ASSIGN_OR_RETURN(const std::vector<yaml::Entry> items,
                       yaml::ReadList(reader, entry, "a list of figure sets"));
      for (const yaml::Entry& item : items) {
        ASSIGN_OR_RETURN(ExpectedFigures figures, ReadExpected(reader, item.value, item.path));
        path.expected.push_back(std::move(figures));
      }
    }
  }
  for (absl::string_view required : {"id", "name", "rationale"}) {
    RETURN_IF_ERROR(map.Require(required).status());
  }
  if (path.id.empty()) return reader.Fault(node, absl::StrCat(field, ".id"), "must not be empty");
  if (path.name.empty()) {
    return reader.Fault(node, absl::StrCat(field, ".name"), "must not be empty");
  }
  // A 4-bit code plus a bf16 scale and a bf16 zero per group stores
  // 4 + 32/group_size bits per weight; any other figure is arithmetic drift
  // of the kind that once made an unmatched bit budget look matched.
  if (path.group_size.has_value() && path.bits_per_weight.has_value()) {
    double expected_bits = 4.0 + 32.0 / static_cast<double>(*path.group_size);
    if (std::fabs(*path.bits_per_weight - expected_bits) > 1e-9) {
      return reader.Fault(map.Find("bits_per_weight")->value,
                          absl::StrCat(field, ".bits_per_weight"),
                          absl::StrCat(*path.bits_per_weight, " disagrees with 4 + 32/group_size = ",
                                       expected_bits, " for group_size ", *path.group_size));
    }
  }
  // Read last: their expressions may name path.bits_per_weight, and the
  // requirements the engine arguments.
  ExpressionScope scope;
  scope.path_bits_per_weight = path.bits_per_weight;
  if (const yaml::Entry* engine_args = map.Find("engine_args")) {
    ASSIGN_OR_RETURN(path.engine_args, ReadEngineArgs(reader, *engine_args, scope));
  }
  if (const yaml::Entry* requirements = map.Find("requires")) {
    ASSIGN_OR_RETURN(path.requirements, ReadRequirements(reader, *requirements, scope));
  }
  return path;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadLabelConditions(
    const yaml::Reader& reader, const yaml::Entry& entry) {
  if (!entry.value.IsMap()) {
    return yaml::Fault(reader, entry, "expected a mapping of label key to value");
  }
  ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::ReadAnyKeys(reader, entry));
  std::vector<std::pair<std::string, std::string>> labels;
  for (const yaml::Entry& label : map.entries()) {
    if (label.key.empty()) {
      return reader.FaultAt(label.key_mark, entry.path, "label keys must be non-empty strings");
    }
    if (!label.value.IsScalar() || label.value.Scalar().empty()) {
      return yaml::Fault(reader, label, "expected a non-empty string value");
    }
    labels.emplace_back(label.key, label.value.Scalar());
  }
  return labels;
}

// A GPU fact's range as a rule writes it: a number (exactly that value:
// [v, v + 1 unit)) or {at_least: A, below: B}, either bound optional,
// converted to the fact's unit (`scale` units per written unit). Counts,
// releases and capabilities must be whole units (8.95 is no capability);
// GiB become bytes rounded up.
absl::StatusOr<std::pair<uint64_t, uint64_t>> ReadFactRange(const yaml::Reader& reader,
                                                            const yaml::Entry& entry,
                                                            double scale, double max_written,
                                                            bool exact_allowed,
                                                            bool whole_units) {
  auto convert = [&](const yaml::Entry& item) -> absl::StatusOr<uint64_t> {
    ASSIGN_OR_RETURN(const double value, yaml::ReadDouble(reader, item));
    if (value < 0 || value > max_written) {
      return yaml::Fault(reader, item, absl::StrCat("must lie in [0, ", max_written, "]"));
    }
    const double scaled = value * scale;
    const double rounded = std::round(scaled);
    if (whole_units && std::fabs(scaled - rounded) >= 1e-6) {
      return yaml::Fault(reader, item,
                         scale == 1 ? std::string("must be a whole number")
                                    : std::string("expected major.minor with one digit after the "
                                                  "point, e.g. 8.9"));
    }
    // 8.9 * 10 is 88.99999999999999: within a millionth is the figure written.
    return static_cast<uint64_t>(std::fabs(scaled - rounded) < 1e-6 ? rounded
                                                                     : std::ceil(scaled));
  };
  if (!entry.value.IsMap()) {
    if (!exact_allowed) {
      return yaml::Fault(reader, entry, "expected {at_least: A, below: B} (either may be left out)");
    }
    ASSIGN_OR_RETURN(const uint64_t exact, convert(entry));
    return std::make_pair(exact, exact + 1);
  }
  ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::Read(reader, entry, {"at_least", "below"}));
  std::pair<uint64_t, uint64_t> range{0, UINT64_MAX};
  if (const yaml::Entry* at_least = map.Find("at_least")) {
    ASSIGN_OR_RETURN(range.first, convert(*at_least));
  }
  if (const yaml::Entry* below = map.Find("below")) {
    ASSIGN_OR_RETURN(range.second, convert(*below));
  }
  if (map.entries().empty()) {
    return yaml::Fault(reader, entry, "give at_least, below or both");
  }
  if (range.first >= range.second) {
    return yaml::Fault(reader, entry, "matches nothing: at_least is not below `below`");
  }
  return range;
}

absl::StatusOr<RuleMatch> ReadMatch(const yaml::Reader& reader, const yaml::Entry& match_entry) {
  ASSIGN_OR_RETURN(yaml::Map map,
                   yaml::Map::Read(reader, match_entry,
                                   {"hardware_class", "arch", "cpu_flags_any", "cpu_flags_all",
                                    "cpu_flags_none", "supports_bf16", "priority", "labels",
                                    "gpu_count", "gpu_capability", "gpu_memory_gib", "mig",
                                    "l4t_major"}));
  RuleMatch match;
  for (const yaml::Entry& entry : map.entries()) {
    if (entry.key == "gpu_count") {
      ASSIGN_OR_RETURN(match.gpu_count, ReadFactRange(reader, entry, 1, 1e6, true, true));
      continue;
    }
    if (entry.key == "gpu_capability") {
      ASSIGN_OR_RETURN(match.gpu_capability, ReadFactRange(reader, entry, 10, 99.9, true, true));
      continue;
    }
    if (entry.key == "gpu_memory_gib") {
      ASSIGN_OR_RETURN(match.gpu_memory,
                       ReadFactRange(reader, entry, 1073741824.0, 8388608, false, false));
      continue;
    }
    if (entry.key == "l4t_major") {
      ASSIGN_OR_RETURN(match.l4t_major, ReadFactRange(reader, entry, 1, 1e6, true, true));
      continue;
    }
    if (entry.key == "mig") {
      ASSIGN_OR_RETURN(match.mig, yaml::ReadBool(reader, entry));
      continue;
    }
    if (entry.key == "supports_bf16") {
      ASSIGN_OR_RETURN(match.supports_bf16, yaml::ReadBool(reader, entry));
      continue;
    }
    if (entry.key == "labels") {
      ASSIGN_OR_RETURN(match.labels, ReadLabelConditions(reader, entry));
      continue;
    }
    ASSIGN_OR_RETURN(std::vector<std::string> values, yaml::ReadStringList(reader, entry));
    if (values.empty()) {
      return yaml::Fault(reader, entry,
                         "an empty list matches nothing; omit the condition to match anything");
    }
    for (const std::string& value : values) {
      if (value.empty()) {
        return yaml::Fault(reader, entry, "values must not be empty");
      }
    }
    if (entry.key == "hardware_class") {
      for (const std::string& value : values) {
        absl::StatusOr<HardwareClass> parsed = ParseHardwareClass(value);
        if (!parsed.ok()) return yaml::Fault(reader, entry, parsed.status().message());
        match.hardware_classes.push_back(*parsed);
      }
    } else if (entry.key == "priority") {
      for (const std::string& value : values) {
        absl::StatusOr<v1::Priority> parsed = ParseRulePriority(value);
        if (!parsed.ok()) return yaml::Fault(reader, entry, parsed.status().message());
        match.priorities.push_back(*parsed);
      }
    } else if (entry.key == "arch") {
      match.arch = std::move(values);
    } else if (entry.key == "cpu_flags_any") {
      match.cpu_flags_any = std::move(values);
    } else if (entry.key == "cpu_flags_all") {
      match.cpu_flags_all = std::move(values);
    } else if (entry.key == "cpu_flags_none") {
      match.cpu_flags_none = std::move(values);
    }
  }
  return match;
}

absl::StatusOr<Rule> ReadRule(const yaml::Reader& reader, const YAML::Node& node,
                              const std::string& field) {
  ASSIGN_OR_RETURN(yaml::Map map, yaml::Map::Read(reader, node, field, {"name", "match", "path"}));
  Rule rule;
  for (const yaml::Entry& entry : map.entries()) {
    if (entry.key == "name") {
      ASSIGN_OR_RETURN(rule.name, yaml::ReadString(reader, entry));
    } else if (entry.key == "path") {
      ASSIGN_OR_RETURN(rule.path_id, yaml::ReadString(reader, entry));
    } else if (entry.key == "match") {
      ASSIGN_OR_RETURN(rule.match, ReadMatch(reader, entry));
    }
  }
  for (absl::string_view required : {"name", "path"}) {
    RETURN_IF_ERROR(map.Require(required).status());
  }
  if (rule.name.empty()) {
    return reader.Fault(node, absl::StrCat(field, ".name"), "must not be empty");
  }
  return rule;
}

}  // namespace

absl::StatusOr<PolicyDocument> ParsePolicyDocument(absl::string_view yaml_text,
                                                   absl::string_view source_name,
                                                   const std::atomic<bool>* cancel) {
  yaml::Reader reader(source_name);
  yaml::Limits limits;
  limits.max_bytes = kMaxPolicyBytes;
  limits.max_nodes = kMaxPolicyNodes;
  limits.cancel = cancel;
  ASSIGN_OR_RETURN(const YAML::Node root, yaml::LoadBounded(yaml_text, source_name, limits));
  if (!root.IsDefined() || root.IsNull()) {
    return reader.FaultAt(YAML::Mark::null_mark(), "document", "is empty");
  }
  ASSIGN_OR_RETURN(yaml::Map top, yaml::Map::Read(reader, root, "", {"schema", "paths", "rules"}));
  for (absl::string_view required : {"schema", "paths", "rules"}) {
    RETURN_IF_ERROR(top.Require(required).status());
  }

  const yaml::Entry& schema = *top.Find("schema");
  ASSIGN_OR_RETURN(uint32_t schema_version, yaml::ReadUint32(reader, schema));
  if (schema_version != kSchemaVersion) {
    return reader.Fault(schema.value, "schema",
                        absl::StrCat("unsupported schema ", schema_version, "; this build reads ",
                                     kSchemaVersion));
  }

  PolicyDocument document;
  const yaml::Entry& paths = *top.Find("paths");
  if (!paths.value.IsSequence() || paths.value.size() == 0) {
    return reader.Fault(paths.value, "paths", "expected a non-empty list of path definitions",
                        paths.key_mark);
  }
  if (paths.value.size() > kMaxPolicyPaths) {
    return reader.Fault(paths.value, "paths",
                        absl::StrCat(paths.value.size(), " path definitions; a policy may have at "
                                     "most ", kMaxPolicyPaths),
                        paths.key_mark);
  }
  std::set<std::string> path_ids;
  for (size_t i = 0; i < paths.value.size(); ++i) {
    const std::string field = absl::StrCat("paths[", i, "]");
    ASSIGN_OR_RETURN(PathDefinition path, ReadPath(reader, paths.value[i], field));
    if (!path_ids.insert(path.id).second) {
      return reader.Fault(paths.value[i]["id"], absl::StrCat(field, ".id"),
                          absl::StrCat("duplicate path id '", path.id, "'"));
    }
    document.paths.push_back(std::move(path));
  }

  const yaml::Entry& rules = *top.Find("rules");
  if (!rules.value.IsSequence() || rules.value.size() == 0) {
    return reader.Fault(rules.value, "rules", "expected a non-empty list of rules",
                        rules.key_mark);
  }
  // Checked before any rule is read: the totality check's cost grows with
  // the rule count, and a reload must stay short.
  if (rules.value.size() > kMaxPolicyRules) {
    return reader.Fault(rules.value, "rules",
                        absl::StrCat(rules.value.size(), " rules; a policy may have at most ",
                                     kMaxPolicyRules),
                        rules.key_mark);
  }
  std::set<std::string> rule_names;
  for (size_t i = 0; i < rules.value.size(); ++i) {
    const std::string field = absl::StrCat("rules[", i, "]");
    ASSIGN_OR_RETURN(Rule rule, ReadRule(reader, rules.value[i], field));
    if (path_ids.count(rule.path_id) == 0) {
      return reader.Fault(rules.value[i]["path"], absl::StrCat(field, ".path"),
                          absl::StrCat("rule '", rule.name, "' points at undefined path id '",
                                       rule.path_id, "'"));
    }
    if (!rule_names.insert(rule.name).second) {
      return reader.Fault(rules.value[i]["name"], absl::StrCat(field, ".name"),
                          absl::StrCat("duplicate rule name '", rule.name, "'"));
    }
    document.rules.push_back(std::move(rule));
  }
  document.rules_location = absl::StrCat(source_name, ":", rules.key_mark.line + 1);
  return document;
}

}  // namespace weightpath::policy
