#include "trust/json.h"

#include <cstdlib>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace weightpath::trust {

Json Json::Bool(bool value) {
  Json json;
  json.value_ = value;
  return json;
}

Json Json::Int(int64_t value) {
  Json json;
  json.value_ = value;
  return json;
}

Json Json::String(std::string value) {
  Json json;
  json.value_ = std::move(value);
  return json;
}

Json Json::MakeArray(Array values) {
  Json json;
  json.value_ = std::move(values);
  return json;
}

Json Json::MakeObject(Object members) {
  Json json;
  json.value_ = std::move(members);
  return json;
}

// std::get throws on a type mismatch; the library is built without relying
// on exceptions being caught, so a mismatch is a bug that ends the process.
bool Json::bool_value() const {
  if (!is_bool()) std::abort();
  return std::get<bool>(value_);
}
int64_t Json::int_value() const {
  if (!is_int()) std::abort();
  return std::get<int64_t>(value_);
}
const std::string& Json::string_value() const {
  if (!is_string()) std::abort();
  return std::get<std::string>(value_);
}
const Json::Array& Json::array() const {
  if (!is_array()) std::abort();
  return std::get<Array>(value_);
}
Json::Array& Json::array() {
  if (!is_array()) std::abort();
  return std::get<Array>(value_);
}
const Json::Object& Json::object() const {
  if (!is_object()) std::abort();
  return std::get<Object>(value_);
}
Json::Object& Json::object() {
  if (!is_object()) std::abort();
  return std::get<Object>(value_);
}

const Json* Json::Find(absl::string_view key) const {
  if (!is_object()) return nullptr;
  const Object& members = std::get<Object>(value_);
  auto it = members.find(key);
  return it == members.end() ? nullptr : &it->second;
}

void Json::Set(std::string key, Json value) { object()[std::move(key)] = std::move(value); }

absl::string_view JsonTypeName(Json::Type type) {
  switch (type) {
    case Json::Type::kNull:
      return "null";
    case Json::Type::kBool:
      return "a boolean";
    case Json::Type::kInt:
      return "an integer";
    case Json::Type::kString:
      return "a string";
    case Json::Type::kArray:
      return "an array";
    case Json::Type::kObject:
      return "an object";
  }
  return "unknown";
}

namespace {

class Parser {
 public:
  Parser(absl::string_view text, absl::string_view label, const JsonParseLimits& limits)
      : text_(text), label_(label), limits_(limits) {}

  absl::StatusOr<Json> ParseDocument() {
    // A byte order mark is refused like any other stray byte: RFC 8259 lets
    // a parser skip it, and two readers that differ there differ on the text.
    SkipWhitespace();
    Json value;
    if (absl::Status status = ParseValue(0, value); !status.ok()) return status;
    SkipWhitespace();
    if (position_ != text_.size()) return Error("unexpected text after the JSON document");
    return value;
  }

 private:
  absl::Status Error(absl::string_view reason) const {
    return absl::InvalidArgumentError(
        absl::StrCat(label_, ": byte ", position_, ": ", reason));
  }

  void SkipWhitespace() {
    while (position_ < text_.size()) {
      const char c = text_[position_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++position_;
    }
  }

  bool Consume(absl::string_view literal) {
    if (text_.substr(position_, literal.size()) != literal) return false;
    position_ += literal.size();
    return true;
  }

  absl::Status ParseValue(int depth, Json& out) {
    if (position_ >= text_.size()) return Error("unexpected end of input");
    switch (text_[position_]) {
      case '{':
        return ParseObject(depth + 1, out);
      case '[':
        return ParseArray(depth + 1, out);
      case '"': {
        std::string value;
        if (absl::Status status = ParseString(value); !status.ok()) return status;
        out = Json::String(std::move(value));
        return absl::OkStatus();
      }
      case 't':
        if (Consume("true")) {
          out = Json::Bool(true);
          return absl::OkStatus();
        }
        break;
      case 'f':
        if (Consume("false")) {
          out = Json::Bool(false);
          return absl::OkStatus();
        }
        break;
      case 'n':
        if (Consume("null")) {
          out = Json::Null();
          return absl::OkStatus();
        }
        break;
      default:
        if (text_[position_] == '-' || (text_[position_] >= '0' && text_[position_] <= '9')) {
          return ParseNumber(out);
        }
        break;
    }
    return Error("expected a JSON value");
  }

  absl::Status CheckDepth(int depth) const {
    if (depth > limits_.max_depth) {
      return Error(absl::StrCat("nested deeper than ", limits_.max_depth, " levels"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseObject(int depth, Json& out) {
    if (absl::Status status = CheckDepth(depth); !status.ok()) return status;
    ++position_;  // '{'
    Json::Object members;
    SkipWhitespace();
    if (position_ < text_.size() && text_[position_] == '}') {
      ++position_;
      out = Json::MakeObject(std::move(members));
      return absl::OkStatus();
    }
    for (;;) {
      SkipWhitespace();
      if (position_ >= text_.size() || text_[position_] != '"') {
        return Error("expected a string key");
      }
      const size_t key_at = position_;
      std::string key;
      if (absl::Status status = ParseString(key); !status.ok()) return status;
      SkipWhitespace();
      if (position_ >= text_.size() || text_[position_] != ':') return Error("expected ':'");
      ++position_;
      SkipWhitespace();
      Json value;
      if (absl::Status status = ParseValue(depth, value); !status.ok()) return status;
      auto [it, inserted] = members.emplace(std::move(key), std::move(value));
      if (!inserted) {
        position_ = key_at;
        return Error(absl::StrCat("duplicate key \"", it->first, "\""));
      }
      SkipWhitespace();
      if (position_ >= text_.size()) return Error("unexpected end of input in an object");
      if (text_[position_] == ',') {
        ++position_;
        continue;
      }
      if (text_[position_] == '}') {
        ++position_;
        out = Json::MakeObject(std::move(members));
        return absl::OkStatus();
      }
      return Error("expected ',' or '}'");
    }
  }

  absl::Status ParseArray(int depth, Json& out) {
    if (absl::Status status = CheckDepth(depth); !status.ok()) return status;
    ++position_;  // '['
    Json::Array values;
    SkipWhitespace();
    if (position_ < text_.size() && text_[position_] == ']') {
      ++position_;
      out = Json::MakeArray(std::move(values));
      return absl::OkStatus();
    }
    for (;;) {
      SkipWhitespace();
      Json value;
      if (absl::Status status = ParseValue(depth, value); !status.ok()) return status;
      values.push_back(std::move(value));
      SkipWhitespace();
      if (position_ >= text_.size()) return Error("unexpected end of input in an array");
      if (text_[position_] == ',') {
        ++position_;
        continue;
      }
      if (text_[position_] == ']') {
        ++position_;
        out = Json::MakeArray(std::move(values));
        return absl::OkStatus();
      }
      return Error("expected ',' or ']'");
    }
  }

  absl::Status ParseNumber(Json& out) {
    const size_t start = position_;
    bool negative = false;
    if (text_[position_] == '-') {
      negative = true;
      ++position_;
    }
    if (position_ >= text_.size() || text_[position_] < '0' || text_[position_] > '9') {
      return Error("expected a digit");
    }
    if (text_[position_] == '0' && position_ + 1 < text_.size() && text_[position_ + 1] >= '0' &&
        text_[position_ + 1] <= '9') {
      return Error("a number may not have a leading zero");
    }
    // Accumulate as a negative number: int64's range is one larger on that
    // side, so INT64_MIN parses without overflow.
    int64_t value = 0;
    while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9') {
      const int digit = text_[position_] - '0';
      if (value < (std::numeric_limits<int64_t>::min() + digit) / 10) {
        position_ = start;
        return Error("integer out of the 64-bit range");
      }
      value = value * 10 - digit;
      ++position_;
    }
    if (position_ < text_.size() &&
        (text_[position_] == '.' || text_[position_] == 'e' || text_[position_] == 'E')) {
      position_ = start;
      return Error("a number with a fraction or exponent (canonical JSON allows integers only)");
    }
    if (!negative) {
      if (value == std::numeric_limits<int64_t>::min()) {
        position_ = start;
        return Error("integer out of the 64-bit range");
      }
      value = -value;
    }
    out = Json::Int(value);
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t code_point, std::string& out) {
    if (code_point < 0x80) {
      out.push_back(static_cast<char>(code_point));
    } else if (code_point < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
      out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else if (code_point < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    }
  }

  absl::StatusOr<uint32_t> ParseHex4() {
    if (position_ + 4 > text_.size()) return Error("truncated \\u escape");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[position_ + i];
      value <<= 4;
      if (c >= '0' && c <= '9') {
        value |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        value |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        value |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Error("bad hex digit in a \\u escape");
      }
    }
    position_ += 4;
    return value;
  }

  // One UTF-8 sequence starting at position_, validated (shortest form, no
  // surrogates, at most U+10FFFF) and appended.
  absl::Status CopyUtf8Sequence(std::string& out) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text_[i]); };
    const unsigned char lead = byte(position_);
    size_t length = 0;
    uint32_t code_point = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
      code_point = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      code_point = lead & 0x0F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      code_point = lead & 0x07;
    } else {
      return Error("invalid UTF-8");
    }
    if (position_ + length > text_.size()) return Error("truncated UTF-8 sequence");
    for (size_t i = 1; i < length; ++i) {
      const unsigned char continuation = byte(position_ + i);
      if ((continuation & 0xC0) != 0x80) return Error("invalid UTF-8");
      code_point = (code_point << 6) | (continuation & 0x3F);
    }
    if ((length == 3 && code_point < 0x800) || (length == 4 && code_point < 0x10000) ||
        code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return Error("invalid UTF-8 (overlong, surrogate or out of range)");
    }
    out.append(text_.data() + position_, length);
    position_ += length;
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string& out) {
    ++position_;  // opening quote
    for (;;) {
      if (position_ >= text_.size()) return Error("unterminated string");
      const unsigned char c = static_cast<unsigned char>(text_[position_]);
      if (c == '"') {
        ++position_;
        return absl::OkStatus();
      }
      if (c < 0x20) return Error("control character in a string (must be escaped)");
      if (c >= 0x80) {
        if (absl::Status status = CopyUtf8Sequence(out); !status.ok()) return status;
        continue;
      }
      if (c != '\\') {
        // A run of plain ASCII goes in with one append: most of a metadata
        // file is hex digests and paths.
        size_t end = position_ + 1;
        while (end < text_.size()) {
          const unsigned char next = static_cast<unsigned char>(text_[end]);
          if (next == '"' || next == '\\' || next < 0x20 || next >= 0x80) break;
          ++end;
        }
        out.append(text_.data() + position_, end - position_);
        position_ = end;
        continue;
      }
      ++position_;
      if (position_ >= text_.size()) return Error("unterminated escape");
      const char escape = text_[position_++];
      switch (escape) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          absl::StatusOr<uint32_t> unit = ParseHex4();
          if (!unit.ok()) return unit.status();
          uint32_t code_point = *unit;
          if (code_point >= 0xDC00 && code_point <= 0xDFFF) {
            return Error("lone low surrogate in a \\u escape");
          }
          if (code_point >= 0xD800 && code_point <= 0xDBFF) {
            if (!Consume("\\u")) return Error("high surrogate not followed by a low one");
            absl::StatusOr<uint32_t> low = ParseHex4();
            if (!low.ok()) return low.status();
            if (*low < 0xDC00 || *low > 0xDFFF) {
              return Error("high surrogate not followed by a low one");
            }
            code_point = 0x10000 + ((code_point - 0xD800) << 10) + (*low - 0xDC00);
          }
          AppendUtf8(code_point, out);
          break;
        }
        default:
          return Error("unknown escape in a string");
      }
    }
  }

  absl::string_view text_;
  absl::string_view label_;
  const JsonParseLimits& limits_;
  size_t position_ = 0;
};

void AppendCanonicalString(const std::string& value, std::string& out) {
  out.push_back('"');
  size_t start = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '"' || value[i] == '\\') {
      out.append(value, start, i - start);
      out.push_back('\\');
      start = i;
    }
  }
  out.append(value, start, std::string::npos);
  out.push_back('"');
}

void AppendPrettyString(const std::string& value, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : value) {
    const unsigned char byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out.push_back(kHex[byte >> 4]);
          out.push_back(kHex[byte & 0xF]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void AppendPretty(const Json& value, int indent, std::string& out) {
  const auto newline = [&](int level) {
    out.push_back('\n');
    out.append(static_cast<size_t>(level) * 2, ' ');
  };
  switch (value.type()) {
    case Json::Type::kNull:
    case Json::Type::kBool:
    case Json::Type::kInt:
      AppendCanonicalJson(value, out);
      return;
    case Json::Type::kString:
      AppendPrettyString(value.string_value(), out);
      return;
    case Json::Type::kArray: {
      if (value.array().empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      bool first = true;
      for (const Json& element : value.array()) {
        if (!first) out.push_back(',');
        first = false;
        newline(indent + 1);
        AppendPretty(element, indent + 1, out);
      }
      newline(indent);
      out.push_back(']');
      return;
    }
    case Json::Type::kObject: {
      if (value.object().empty()) {
        out += "{}";
        return;
      }
      out.push_back('{');
      bool first = true;
      for (const auto& [key, member] : value.object()) {
        if (!first) out.push_back(',');
        first = false;
        newline(indent + 1);
        AppendPrettyString(key, out);
        out += ": ";
        AppendPretty(member, indent + 1, out);
      }
      newline(indent);
      out.push_back('}');
      return;
    }
  }
}

}  // namespace

absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view label,
                               const JsonParseLimits& limits) {
  return Parser(text, label, limits).ParseDocument();
}

void AppendCanonicalJson(const Json& value, std::string& out) {
  switch (value.type()) {
    case Json::Type::kNull:
      out += "null";
      return;
    case Json::Type::kBool:
      out += value.bool_value() ? "true" : "false";
      return;
    case Json::Type::kInt:
      absl::StrAppend(&out, value.int_value());
      return;
    case Json::Type::kString:
      AppendCanonicalString(value.string_value(), out);
      return;
    case Json::Type::kArray: {
      out.push_back('[');
      bool first = true;
      for (const Json& element : value.array()) {
        if (!first) out.push_back(',');
        first = false;
        AppendCanonicalJson(element, out);
      }
      out.push_back(']');
      return;
    }
    case Json::Type::kObject: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, member] : value.object()) {
        if (!first) out.push_back(',');
        first = false;
        AppendCanonicalString(key, out);
        out.push_back(':');
        AppendCanonicalJson(member, out);
      }
      out.push_back('}');
      return;
    }
  }
}

std::string CanonicalJson(const Json& value) {
  std::string out;
  AppendCanonicalJson(value, out);
  return out;
}

std::string PrettyJson(const Json& value) {
  std::string out;
  AppendPretty(value, 0, out);
  out.push_back('\n');
  return out;
}

}  // namespace weightpath::trust
