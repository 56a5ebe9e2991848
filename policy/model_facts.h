// What the catalog says about a model, for the engine-argument expressions
// (model.*): every fact optional, each within the range Variables() gives
// it (the catalog refuses anything else, naming the field).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/strict_yaml.h"

namespace weightpath::policy {

struct ModelFacts {
  std::optional<uint64_t> parameters;
  std::optional<uint64_t> attention_heads;
  std::optional<uint64_t> kv_heads;
  std::optional<uint64_t> layers;
  std::optional<uint64_t> head_dim;
  std::optional<uint64_t> max_context;  // tokens
};

// At most this many models' facts in one document.
inline constexpr size_t kMaxModelFacts = 1000;

// `model_facts: {MODEL: {parameters, attention_heads, kv_heads, layers,
// head_dim, max_context}}`, each fact optional and within its range
// (expression.h Variables()); a fault names the line and the field.
absl::StatusOr<std::map<std::string, ModelFacts, std::less<>>> ReadModelFacts(
    const yaml::Reader& reader, const yaml::Entry& entry);

// The `model_facts` of a whole document (a catalog: its other top-level
// keys are not read here); none when it has no such key.
absl::StatusOr<std::map<std::string, ModelFacts, std::less<>>> ParseModelFactsDocument(
    absl::string_view yaml_text, absl::string_view source_name);

}  // namespace weightpath::policy
