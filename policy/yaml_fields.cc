#include "policy/yaml_fields.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/control_characters.h"

namespace weightpath::policy {
namespace {

bool HasPosition(const YAML::Mark& mark) { return mark.line >= 0 && mark.column >= 0; }

absl::string_view KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Undefined:
      return "nothing";
  }
  return "nothing";
}

absl::StatusOr<std::string> ScalarText(const YamlReader& reader, const YAML::Node& node,
                                       const YAML::Mark& fallback, absl::string_view field,
                                       absl::string_view expected) {
  if (!node.IsScalar()) {
    return reader.Fault(node, field, absl::StrCat("expected ", expected, ", got ", KindName(node)),
                        fallback);
  }
  return node.Scalar();
}

}  // namespace

absl::Status YamlReader::FaultAt(const YAML::Mark& mark, absl::string_view field,
                                 absl::string_view what) const {
  // Field paths and messages quote the document's own keys and values, which
  // may hold newlines; escaped, they cannot start a line of a log or a
  // terminal on their own.
  const std::string shown_field = ControlEscaped(field);
  const std::string shown_what = ControlEscaped(what);
  if (!HasPosition(mark)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name_, ": ", shown_field, ": ", shown_what));
  }
  // yaml-cpp counts from 0; editors count from 1.
  return absl::InvalidArgumentError(absl::StrCat(source_name_, ":", mark.line + 1, ":",
                                                 mark.column + 1, ": ", shown_field, ": ",
                                                 shown_what));
}

absl::Status YamlReader::Fault(const YAML::Node& node, absl::string_view field,
                               absl::string_view what, const YAML::Mark& fallback) const {
  YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  // A missing value (`key:` with nothing after it) has no position of its own.
  if (!HasPosition(mark) || node.IsNull()) mark = HasPosition(fallback) ? fallback : mark;
  return FaultAt(mark, field, what);
}

absl::StatusOr<YamlMap> YamlMap::Read(const YamlReader& reader, const YAML::Node& node,
                                      absl::string_view field,
                                      std::initializer_list<absl::string_view> allowed,
                                      const YAML::Mark& fallback) {
  if (!node.IsMap()) {
    return reader.Fault(node, field, absl::StrCat("expected a mapping, got ", KindName(node)),
                        fallback);
  }
  YamlMap map;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key_node = it->first;
    if (!key_node.IsScalar()) {
      return reader.Fault(key_node, field, "keys must be plain names");
    }
    std::string key = key_node.Scalar();
    std::string key_field = field.empty() ? key : absl::StrCat(field, ".", key);
    bool known = false;
    for (absl::string_view candidate : allowed) known = known || candidate == key;
    if (!known) {
      return reader.Fault(key_node, key_field,
                          absl::StrCat("unknown key '", key,
                                       "' (allowed: ", absl::StrJoin(allowed, ", "), ")"));
    }
    if (map.Find(key) != nullptr) {
      return reader.Fault(key_node, key_field, "duplicate key");
    }
    map.entries_.push_back(Entry{std::move(key), key_node.Mark(), it->second});
  }
  return map;
}

const YamlMap::Entry* YamlMap::Find(absl::string_view key) const {
  for (const Entry& entry : entries_) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

absl::StatusOr<std::string> ReadString(const YamlReader& reader, const YamlMap::Entry& entry,
                                       absl::string_view field) {
  return ScalarText(reader, entry.value, entry.key_mark, field, "a string");
}

absl::StatusOr<bool> ReadBool(const YamlReader& reader, const YamlMap::Entry& entry,
                              absl::string_view field) {
  absl::StatusOr<std::string> text =
      ScalarText(reader, entry.value, entry.key_mark, field, "true or false");
  if (!text.ok()) return text.status();
  if (*text == "true") return true;
  if (*text == "false") return false;
  return reader.Fault(entry.value, field,
                      absl::StrCat("expected true or false, got '", *text, "'"), entry.key_mark);
}

absl::StatusOr<uint32_t> ReadUint32(const YamlReader& reader, const YamlMap::Entry& entry,
                                    absl::string_view field) {
  absl::StatusOr<std::string> text =
      ScalarText(reader, entry.value, entry.key_mark, field, "a non-negative integer");
  if (!text.ok()) return text.status();
  uint32_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || text->empty() || (*text)[0] == '-' ||
      (*text)[0] == '+') {
    return reader.Fault(entry.value, field,
                        absl::StrCat("expected a non-negative integer, got '", *text, "'"),
                        entry.key_mark);
  }
  return value;
}

absl::StatusOr<double> ReadDouble(const YamlReader& reader, const YamlMap::Entry& entry,
                                  absl::string_view field) {
  absl::StatusOr<std::string> text =
      ScalarText(reader, entry.value, entry.key_mark, field, "a number");
  if (!text.ok()) return text.status();
  double value = 0;
  if (!absl::SimpleAtod(*text, &value) || !std::isfinite(value)) {
    return reader.Fault(entry.value, field,
                        absl::StrCat("expected a finite number, got '", *text, "'"),
                        entry.key_mark);
  }
  return value;
}

absl::StatusOr<std::vector<std::string>> ReadStringList(const YamlReader& reader,
                                                        const YamlMap::Entry& entry,
                                                        absl::string_view field) {
  const YAML::Node& node = entry.value;
  if (node.IsScalar()) return std::vector<std::string>{node.Scalar()};
  if (!node.IsSequence()) {
    return reader.Fault(node, field,
                        absl::StrCat("expected a list of strings, got ", KindName(node)),
                        entry.key_mark);
  }
  std::vector<std::string> values;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    std::string item_field = absl::StrCat(field, "[", i, "]");
    if (!item.IsScalar()) {
      return reader.Fault(item, item_field,
                          absl::StrCat("expected a string, got ", KindName(item)), entry.key_mark);
    }
    values.push_back(item.Scalar());
  }
  return values;
}

}  // namespace weightpath::policy
