// The JSON that TUF metadata is made of, and its canonical form.
//
// TUF signs the OLPC canonical JSON encoding of a document's "signed" object
// (securesystemslib's encode_canonical): object keys sorted by code point, no
// whitespace, only '"' and '\' escaped inside strings, integers only. Two
// implementations agree on a signature only if they agree on these bytes, so
// the parser is strict where a lenient one would let two readers see two
// different documents in the same bytes:
//   - a duplicate object key is refused (readers differ on which one wins);
//   - a number with a fraction or an exponent is refused (canonical JSON has
//     no floats), as is an integer outside int64;
//   - text must be valid UTF-8, escapes must decode to scalar values (no lone
//     surrogates), and nothing but whitespace may follow the document;
//   - nesting is bounded, so a hostile document cannot exhaust the stack.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace weightpath::trust {

class Json {
 public:
  enum class Type { kNull, kBool, kInt, kString, kArray, kObject };
  using Array = std::vector<Json>;
  // std::map orders std::string keys bytewise (char_traits<char> compares as
  // unsigned char), and bytewise order of UTF-8 is code point order: exactly
  // the key order canonical JSON asks for.
  using Object = std::map<std::string, Json, std::less<>>;

  Json() = default;  // null
  static Json Null() { return Json(); }
  static Json Bool(bool value);
  static Json Int(int64_t value);
  static Json String(std::string value);
  static Json MakeArray(Array values = {});
  static Json MakeObject(Object members = {});

  Type type() const { return static_cast<Type>(value_.index()); }
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  // Accessors for a value known to be of that type (checked by the caller
  // with type()); calling the wrong one is a programming error and aborts.
  bool bool_value() const;
  int64_t int_value() const;
  const std::string& string_value() const;
  const Array& array() const;
  Array& array();
  const Object& object() const;
  Object& object();

  // Object member, or nullptr when absent or when this is not an object.
  const Json* Find(absl::string_view key) const;
  // Sets an object member (this must be an object).
  void Set(std::string key, Json value);

  friend bool operator==(const Json& a, const Json& b) { return a.value_ == b.value_; }
  friend bool operator!=(const Json& a, const Json& b) { return !(a == b); }

 private:
  // The alternatives are in Type's order. A targets file of 1,000 artifacts
  // is some 10,000 values, so a value is one variant (56 bytes), not a
  // struct with a member per type.
  std::variant<std::monostate, bool, int64_t, std::string, Array, Object> value_;
};

struct JsonParseLimits {
  // TUF metadata nests about six levels (signed.delegations.roles[].paths[]);
  // 64 leaves room for custom fields and still bounds the recursion.
  int max_depth = 64;
};

// INVALID_ARGUMENT naming `label` (the file or role being read), the byte
// offset and what is wrong, e.g. "timestamp.json: byte 17: duplicate key
// \"version\"".
absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view label,
                               const JsonParseLimits& limits = {});

// OLPC canonical JSON, byte for byte what securesystemslib's
// encode_canonical returns for the same value.
std::string CanonicalJson(const Json& value);
void AppendCanonicalJson(const Json& value, std::string& out);

// Ordinary JSON for people and files: keys sorted, two-space indent, control
// characters escaped, a trailing newline. Parses back to an equal value, so
// its canonical form is the one that was signed.
std::string PrettyJson(const Json& value);

// The name of a type for error messages: "an object", "a string", ...
absl::string_view JsonTypeName(Json::Type type);

}  // namespace weightpath::trust
