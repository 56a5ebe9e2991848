#include "policy/model_facts.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/bounded_yaml.h"
#include "common/status_macros.h"
#include "policy/expression.h"
#include "policy/policy_limits.h"

namespace weightpath::policy {
namespace {

absl::StatusOr<ModelFacts> ReadOneModel(const yaml::Reader& reader, const yaml::Entry& entry) {
  static constexpr struct {
    absl::string_view key;
    Variable variable;
    std::optional<uint64_t> ModelFacts::*field;
  } kFacts[] = {
      {"parameters", Variable::kModelParameters, &ModelFacts::parameters},
      {"attention_heads", Variable::kModelAttentionHeads, &ModelFacts::attention_heads},
      {"kv_heads", Variable::kModelKvHeads, &ModelFacts::kv_heads},
      {"layers", Variable::kModelLayers, &ModelFacts::layers},
      {"head_dim", Variable::kModelHeadDim, &ModelFacts::head_dim},
      {"max_context", Variable::kModelMaxContext, &ModelFacts::max_context},
  };
  ASSIGN_OR_RETURN(const yaml::Map map,
                   yaml::Map::Read(reader, entry,
                                   {"parameters", "attention_heads", "kv_heads", "layers",
                                    "head_dim", "max_context"}));
  ModelFacts facts;
  for (const yaml::Entry& item : map.entries()) {
    for (const auto& fact : kFacts) {
      if (item.key != fact.key) continue;
      const VariableInfo& info = Variables()[static_cast<size_t>(fact.variable)];
      ASSIGN_OR_RETURN(const int64_t value,
                       yaml::ReadInt64(reader, item, static_cast<int64_t>(info.lo),
                                       static_cast<int64_t>(info.hi)));
      facts.*fact.field = static_cast<uint64_t>(value);
    }
  }
  if (facts.kv_heads.has_value() && facts.attention_heads.has_value() &&
      *facts.kv_heads > *facts.attention_heads) {
    return yaml::Fault(reader, *map.Find("kv_heads"), "exceeds attention_heads");
  }
  return facts;
}

}  // namespace

absl::StatusOr<std::map<std::string, ModelFacts, std::less<>>> ReadModelFacts(
    const yaml::Reader& reader, const yaml::Entry& entry) {
  ASSIGN_OR_RETURN(const yaml::Map models, yaml::Map::ReadAnyKeys(reader, entry));
  if (models.entries().size() > kMaxModelFacts) {
    return yaml::Fault(reader, entry,
                       absl::StrCat(models.entries().size(), " models; at most ", kMaxModelFacts));
  }
  std::map<std::string, ModelFacts, std::less<>> facts;
  for (const yaml::Entry& model : models.entries()) {
    ASSIGN_OR_RETURN(facts[model.key], ReadOneModel(reader, model));
  }
  return facts;
}

absl::StatusOr<std::map<std::string, ModelFacts, std::less<>>> ParseModelFactsDocument(
    absl::string_view yaml_text, absl::string_view source_name) {
  yaml::Reader reader(source_name);
  yaml::Limits limits;
  limits.max_bytes = kMaxPolicyBytes;
  limits.max_nodes = kMaxPolicyNodes;
  ASSIGN_OR_RETURN(const YAML::Node root, yaml::LoadBounded(yaml_text, source_name, limits));
  if (!root.IsDefined() || root.IsNull()) return std::map<std::string, ModelFacts, std::less<>>();
  ASSIGN_OR_RETURN(const yaml::Map top, yaml::Map::ReadAnyKeys(reader, root, ""));
  const yaml::Entry* entry = top.Find("model_facts");
  if (entry == nullptr) return std::map<std::string, ModelFacts, std::less<>>();
  return ReadModelFacts(reader, *entry);
}

}  // namespace weightpath::policy
