#include "common/strict_yaml.h"

#include <cmath>
#include <unordered_set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/control_characters.h"

namespace weightpath::yaml {
namespace {

bool HasPosition(const YAML::Mark& mark) { return mark.line >= 0 && mark.column >= 0; }

absl::string_view KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

absl::Status WrongKind(const Reader& reader, const Entry& entry, absl::string_view expected) {
  return Fault(reader, entry, absl::StrCat("expected ", expected, ", got ", KindName(entry.value)));
}

}  // namespace

absl::StatusOr<Map> Map::ReadImpl(const Reader& reader, const YAML::Node& node,
                                  absl::string_view path,
                                  const absl::Span<const absl::string_view>* allowed,
                                  const YAML::Mark& fallback) {
  if (!node.IsMap()) {
    std::string what = absl::StrCat("expected a mapping, got ", KindName(node));
    if (allowed != nullptr && !allowed->empty()) {
      absl::StrAppend(&what, " (keys: ", absl::StrJoin(*allowed, ", "), ")");
    }
    return reader.Fault(node, path, what, fallback);
  }
  std::vector<Entry> entries;
  entries.reserve(node.size());
  std::unordered_set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key_node = it->first;
    if (!key_node.IsScalar()) return reader.Fault(key_node, path, "keys must be plain names");
    Entry entry{key_node.Scalar(), ChildPath(path, key_node.Scalar()), key_node.Mark(),
                it->second};
    if (allowed != nullptr) {
      bool known = false;
      for (absl::string_view candidate : *allowed) known = known || candidate == entry.key;
      if (!known) return UnknownKey(reader, entry, *allowed);
    }
    // yaml-cpp keeps both; which one a reader would take is not the
    // author's to guess. A set, not a scan of the earlier keys: a mapping
    // may hold tens of thousands of them.
    if (!seen.insert(entry.key).second) return reader.Fault(key_node, entry.path, "duplicate key");
    entries.push_back(std::move(entry));
  }
  Map map;
  map.reader_ = &reader;
  map.node_ = node;
  map.path_ = std::string(path);
  map.entries_ = std::move(entries);
  return map;
}

absl::Status Reader::FaultAt(const YAML::Mark& mark, absl::string_view path,
                             absl::string_view what) const {
  // Key paths and messages quote the document's own keys and values, which
  // may hold newlines; escaped, they cannot start a line of a log or a
  // terminal on their own.
  std::string message = std::string(source_name_);
  // yaml-cpp counts from 0; editors count from 1.
  if (HasPosition(mark)) absl::StrAppend(&message, ":", mark.line + 1, ":", mark.column + 1);
  absl::StrAppend(&message, ": ");
  if (!path.empty()) absl::StrAppend(&message, ControlEscaped(path), ": ");
  absl::StrAppend(&message, ControlEscaped(what));
  return absl::InvalidArgumentError(message);
}

absl::Status Reader::Fault(const YAML::Node& node, absl::string_view path, absl::string_view what,
                           const YAML::Mark& fallback) const {
  YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  // A missing value (`key:` with nothing after it) has no position of its own.
  if (!HasPosition(mark) || node.IsNull()) mark = HasPosition(fallback) ? fallback : mark;
  return FaultAt(mark, path, what);
}

std::string ChildPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

absl::StatusOr<Map> Map::Read(const Reader& reader, const YAML::Node& node, absl::string_view path,
                              absl::Span<const absl::string_view> allowed,
                              const YAML::Mark& fallback) {
  return ReadImpl(reader, node, path, &allowed, fallback);
}

absl::StatusOr<Map> Map::Read(const Reader& reader, const Entry& entry,
                              absl::Span<const absl::string_view> allowed) {
  return ReadImpl(reader, entry.value, entry.path, &allowed, entry.key_mark);
}

absl::StatusOr<Map> Map::ReadAnyKeys(const Reader& reader, const YAML::Node& node,
                                     absl::string_view path, const YAML::Mark& fallback) {
  return ReadImpl(reader, node, path, nullptr, fallback);
}

absl::StatusOr<Map> Map::ReadAnyKeys(const Reader& reader, const Entry& entry) {
  return ReadImpl(reader, entry.value, entry.path, nullptr, entry.key_mark);
}

const Entry* Map::Find(absl::string_view key) const {
  for (const Entry& entry : entries_) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

absl::StatusOr<const Entry*> Map::Require(absl::string_view key, absl::string_view what) const {
  if (const Entry* entry = Find(key)) return entry;
  return reader_->Fault(node_, ChildPath(path_, key), what);
}

absl::Status UnknownKey(const Reader& reader, const Entry& entry,
                        absl::Span<const absl::string_view> allowed) {
  return reader.FaultAt(entry.key_mark, entry.path,
                        absl::StrCat("unknown key '", entry.key, "' (allowed: ",
                                     absl::StrJoin(allowed, ", "), ")"));
}

absl::StatusOr<std::vector<Entry>> ReadList(const Reader& reader, const Entry& entry,
                                            absl::string_view expected) {
  if (!entry.value.IsSequence()) {
    return WrongKind(reader, entry, expected);
  }
  std::vector<Entry> items;
  items.reserve(entry.value.size());
  for (size_t i = 0; i < entry.value.size(); ++i) {
    items.push_back(
        Entry{"", absl::StrCat(entry.path, "[", i, "]"), entry.key_mark, entry.value[i]});
  }
  return items;
}

absl::Status Fault(const Reader& reader, const Entry& entry, absl::string_view what) {
  return reader.Fault(entry.value, entry.path, what, entry.key_mark);
}

absl::StatusOr<std::string> ReadScalar(const Reader& reader, const Entry& entry,
                                       absl::string_view expected) {
  if (!entry.value.IsScalar()) {
    return WrongKind(reader, entry, expected);
  }
  return entry.value.Scalar();
}

absl::StatusOr<std::string> ReadString(const Reader& reader, const Entry& entry) {
  return ReadScalar(reader, entry, "a string");
}

absl::StatusOr<std::string> ReadNonEmptyString(const Reader& reader, const Entry& entry) {
  absl::StatusOr<std::string> text = ReadString(reader, entry);
  if (text.ok() && text->empty()) return Fault(reader, entry, "must not be empty");
  return text;
}

absl::StatusOr<bool> ReadBool(const Reader& reader, const Entry& entry) {
  absl::StatusOr<std::string> text = ReadScalar(reader, entry, "true or false");
  if (!text.ok()) return text.status();
  if (*text == "true") return true;
  if (*text == "false") return false;
  return Fault(reader, entry, absl::StrCat("expected true or false, got '", *text, "'"));
}

absl::StatusOr<uint32_t> ReadUint32(const Reader& reader, const Entry& entry) {
  absl::StatusOr<std::string> text = ReadScalar(reader, entry, "a non-negative integer");
  if (!text.ok()) return text.status();
  uint32_t value = 0;
  if (text->empty() || (*text)[0] == '-' || (*text)[0] == '+' ||
      !absl::SimpleAtoi(*text, &value)) {
    return Fault(reader, entry, absl::StrCat("expected a non-negative integer, got '", *text, "'"));
  }
  return value;
}

absl::StatusOr<int64_t> ReadInt64(const Reader& reader, const Entry& entry, int64_t min,
                                  int64_t max) {
  const std::string expected = absl::StrCat("an integer from ", min, " to ", max);
  absl::StatusOr<std::string> text = ReadScalar(reader, entry, expected);
  if (!text.ok()) return text.status();
  int64_t value = 0;
  if (text->empty() || (*text)[0] == '+' || !absl::SimpleAtoi(*text, &value) || value < min ||
      value > max) {
    return Fault(reader, entry, absl::StrCat("expected ", expected, ", got '", *text, "'"));
  }
  return value;
}

absl::StatusOr<double> ReadDouble(const Reader& reader, const Entry& entry) {
  absl::StatusOr<std::string> text = ReadScalar(reader, entry, "a number");
  if (!text.ok()) return text.status();
  double value = 0;
  if (!absl::SimpleAtod(*text, &value) || !std::isfinite(value)) {
    return Fault(reader, entry, absl::StrCat("expected a finite number, got '", *text, "'"));
  }
  return value;
}

absl::StatusOr<absl::Duration> ReadPositiveDuration(const Reader& reader, const Entry& entry) {
  absl::StatusOr<std::string> text =
      ReadScalar(reader, entry, "a number of seconds or a duration like 500ms");
  if (!text.ok()) return text.status();
  double seconds = 0;
  absl::Duration duration;
  if (absl::SimpleAtod(*text, &seconds)) {
    duration = std::isfinite(seconds) ? absl::Seconds(seconds) : absl::InfiniteDuration();
  } else if (!absl::ParseDuration(*text, &duration)) {
    return Fault(reader, entry,
                 absl::StrCat("'", *text, "' is not a number of seconds or a duration like 500ms"));
  }
  if (duration <= absl::ZeroDuration() || duration == absl::InfiniteDuration()) {
    return Fault(reader, entry, absl::StrCat("must be positive and finite, got '", *text, "'"));
  }
  return duration;
}

absl::StatusOr<std::vector<std::string>> ReadStringList(const Reader& reader, const Entry& entry) {
  if (entry.value.IsScalar()) return std::vector<std::string>{entry.value.Scalar()};
  absl::StatusOr<std::vector<Entry>> items = ReadList(reader, entry, "a list of strings");
  if (!items.ok()) return items.status();
  std::vector<std::string> values;
  values.reserve(items->size());
  for (const Entry& item : *items) {
    absl::StatusOr<std::string> value = ReadString(reader, item);
    if (!value.ok()) return value.status();
    values.push_back(*std::move(value));
  }
  return values;
}

}  // namespace weightpath::yaml
