// Strict reading of YAML nodes into typed values. Every fault comes back as
// INVALID_ARGUMENT "<source>:<line>:<column>: <field path>: <what>", so an
// operator can jump straight to the offending line.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::policy {

class YamlReader {
 public:
  explicit YamlReader(absl::string_view source_name) : source_name_(source_name) {}

  // A fault at `node` (or, when it carries no position, at `fallback`).
  absl::Status Fault(const YAML::Node& node, absl::string_view field, absl::string_view what,
                     const YAML::Mark& fallback = YAML::Mark::null_mark()) const;
  absl::Status FaultAt(const YAML::Mark& mark, absl::string_view field,
                       absl::string_view what) const;

  absl::string_view source_name() const { return source_name_; }

 private:
  std::string source_name_;
};

// A mapping whose keys were checked: unique, and each one of `allowed`.
class YamlMap {
 public:
  static absl::StatusOr<YamlMap> Read(const YamlReader& reader, const YAML::Node& node,
                                      absl::string_view field,
                                      std::initializer_list<absl::string_view> allowed,
                                      const YAML::Mark& fallback = YAML::Mark::null_mark());

  struct Entry {
    std::string key;
    YAML::Mark key_mark;
    YAML::Node value;
  };
  // Null when the key is absent.
  const Entry* Find(absl::string_view key) const;
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

// Scalar readers; `entry` gives the key's position when the value has none.
absl::StatusOr<std::string> ReadString(const YamlReader& reader, const YamlMap::Entry& entry,
                                       absl::string_view field);
absl::StatusOr<bool> ReadBool(const YamlReader& reader, const YamlMap::Entry& entry,
                              absl::string_view field);
absl::StatusOr<uint32_t> ReadUint32(const YamlReader& reader, const YamlMap::Entry& entry,
                                    absl::string_view field);
absl::StatusOr<double> ReadDouble(const YamlReader& reader, const YamlMap::Entry& entry,
                                  absl::string_view field);
// A sequence of strings; a single scalar is read as a one-element list.
absl::StatusOr<std::vector<std::string>> ReadStringList(const YamlReader& reader,
                                                        const YamlMap::Entry& entry,
                                                        absl::string_view field);

}  // namespace weightpath::policy
