// Strict reading of a loaded YAML tree (see bounded_yaml.h for loading it)
// into typed values: the one reader of the policy, the catalog, the server
// and agent configs and rollout files. A mapping is opened with the keys it
// may hold, so a misspelt key is refused (naming the keys it may hold)
// instead of silently ignored, and every fault comes back as
// INVALID_ARGUMENT "<source>:<line>:<column>: <key path>: <what>", so an
// operator can jump straight to the offending line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::yaml {

// The document being read: where its faults point.
class Reader {
 public:
  explicit Reader(absl::string_view source_name) : source_name_(source_name) {}

  // A fault at `node` or, when it carries no position of its own (a missing
  // value, `key:` with nothing after it), at `fallback`.
  absl::Status Fault(const YAML::Node& node, absl::string_view path, absl::string_view what,
                     const YAML::Mark& fallback = YAML::Mark::null_mark()) const;
  // "<source>:<line>:<column>: <path>: <what>"; without a position
  // "<source>: <path>: <what>"; an empty path is left out.
  absl::Status FaultAt(const YAML::Mark& mark, absl::string_view path,
                       absl::string_view what) const;

  absl::string_view source_name() const { return source_name_; }

 private:
  std::string source_name_;
};

// One value of a mapping or a list, with the key path faults name
// ("rules[0].match.arch").
struct Entry {
  // The key as written; empty for a list item.
  std::string key;
  std::string path;
  // The key's position (the list's for an item): where a fault about a
  // value that has no position of its own points.
  YAML::Mark key_mark;
  YAML::Node value;
};

// "<path>.<key>", or just the key at the top of a document.
std::string ChildPath(absl::string_view path, absl::string_view key);

// A mapping whose keys were checked: plain scalars, each one at most once.
// It points at the Reader it was read with, which must outlive it.
class Map {
 public:
  // Refuses a node that is not a mapping, a key that is not a plain
  // scalar, a repeated key, and a key that is not one of `allowed` (the
  // first in the document's order, naming the allowed ones).
  static absl::StatusOr<Map> Read(const Reader& reader, const YAML::Node& node,
                                  absl::string_view path,
                                  absl::Span<const absl::string_view> allowed,
                                  const YAML::Mark& fallback = YAML::Mark::null_mark());
  static absl::StatusOr<Map> Read(const Reader& reader, const Entry& entry,
                                  absl::Span<const absl::string_view> allowed);
  // The same for a mapping whose keys are the author's own (label names,
  // model names): any plain key, each at most once.
  static absl::StatusOr<Map> ReadAnyKeys(const Reader& reader, const YAML::Node& node,
                                         absl::string_view path,
                                         const YAML::Mark& fallback = YAML::Mark::null_mark());
  static absl::StatusOr<Map> ReadAnyKeys(const Reader& reader, const Entry& entry);

  // Null when the key is absent.
  const Entry* Find(absl::string_view key) const;
  // The entry, or "<path>.<key>: <what>" at the mapping.
  absl::StatusOr<const Entry*> Require(absl::string_view key,
                                       absl::string_view what = "is required") const;
  const std::vector<Entry>& entries() const { return entries_; }
  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }

 private:
  static absl::StatusOr<Map> ReadImpl(const Reader& reader, const YAML::Node& node,
                                      absl::string_view path,
                                      const absl::Span<const absl::string_view>* allowed,
                                      const YAML::Mark& fallback);

  const Reader* reader_ = nullptr;
  YAML::Node node_;
  std::string path_;
  std::vector<Entry> entries_;
};

// The fault for a key a mapping may not hold: "unknown key 'KEY' (allowed:
// A, B, ...)" at the key. For readers that decide per key what is allowed.
absl::Status UnknownKey(const Reader& reader, const Entry& entry,
                        absl::Span<const absl::string_view> allowed);

// The items of a list, each as an Entry named "<path>[<index>]"; anything
// else is refused as "expected <expected>, got <what it is>".
absl::StatusOr<std::vector<Entry>> ReadList(const Reader& reader, const Entry& entry,
                                            absl::string_view expected = "a list");

// A fault about the entry's value (at its key when the value has no
// position).
absl::Status Fault(const Reader& reader, const Entry& entry, absl::string_view what);

// Scalar readers; a value of another kind is refused as "expected <what
// was wanted>, got a list" (or a mapping, or nothing).
absl::StatusOr<std::string> ReadScalar(const Reader& reader, const Entry& entry,
                                       absl::string_view expected);
absl::StatusOr<std::string> ReadString(const Reader& reader, const Entry& entry);
// As ReadString, refusing "" with "must not be empty".
absl::StatusOr<std::string> ReadNonEmptyString(const Reader& reader, const Entry& entry);
// `true` or `false` only: YAML 1.1's yes/no/on/off are refused.
absl::StatusOr<bool> ReadBool(const Reader& reader, const Entry& entry);
// Decimal digits only, no sign, at most 2^32 - 1.
absl::StatusOr<uint32_t> ReadUint32(const Reader& reader, const Entry& entry);
// A decimal integer in [min, max].
absl::StatusOr<int64_t> ReadInt64(const Reader& reader, const Entry& entry, int64_t min,
                                  int64_t max);
// A finite number.
absl::StatusOr<double> ReadDouble(const Reader& reader, const Entry& entry);
// A positive, finite duration: a number of seconds (0.5) or a duration
// with units ("500ms", "1h30m").
absl::StatusOr<absl::Duration> ReadPositiveDuration(const Reader& reader, const Entry& entry);
// A list of strings; a single scalar is read as a one-element list.
absl::StatusOr<std::vector<std::string>> ReadStringList(const Reader& reader, const Entry& entry);

}  // namespace weightpath::yaml
