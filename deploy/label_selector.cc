#include "deploy/label_selector.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_violation.h"
#include "common/status_macros.h"

namespace weightpath::deploy {
namespace {

constexpr size_t kMaxNameLength = 63;
constexpr size_t kMaxPrefixLength = 253;

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// The shape shared by key names and values: alphanumeric at both ends,
// '-', '_' and '.' allowed inside.
bool IsQualifiedName(absl::string_view text) {
  if (text.empty() || text.size() > kMaxNameLength) return false;
  if (!IsAlnum(text.front()) || !IsAlnum(text.back())) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

// Lowercase DNS subdomain: dot-separated labels of [a-z0-9-], each
// starting and ending alphanumeric.
bool IsDnsSubdomain(absl::string_view text) {
  if (text.empty() || text.size() > kMaxPrefixLength) return false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t dot = text.find('.', start);
    absl::string_view label =
        text.substr(start, dot == absl::string_view::npos ? absl::string_view::npos : dot - start);
    if (label.empty() || label.size() > kMaxNameLength) return false;
    auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    if (!lower_alnum(label.front()) || !lower_alnum(label.back())) return false;
    for (char c : label) {
      if (!lower_alnum(c) && c != '-') return false;
    }
    if (dot == absl::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

bool IsKeyChar(char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.' || c == '/'; }
bool IsValueChar(char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

absl::string_view OperatorName(v1::LabelRequirement::Operator op) {
  switch (op) {
    case v1::LabelRequirement::OPERATOR_IN:
      return "in";
    case v1::LabelRequirement::OPERATOR_NOT_IN:
      return "notin";
    case v1::LabelRequirement::OPERATOR_EXISTS:
      return "exists";
    case v1::LabelRequirement::OPERATOR_DOES_NOT_EXIST:
      return "!exists";
    default:
      return "unspecified";
  }
}

// A hand-written scanner: the grammar is small, and errors must point at the
// exact term and character.
class SelectorParser {
 public:
  explicit SelectorParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<v1::DeviceSelector> Parse() {
    v1::DeviceSelector selector;
    SkipBlanks();
    if (AtEnd()) return selector;
    while (true) {
      ++term_;
      term_start_ = pos_;
      RETURN_IF_ERROR(ParseTerm(&selector));
      SkipBlanks();
      if (AtEnd()) return selector;
      if (Peek() != ',') return Error("expected ',' between terms");
      ++pos_;
      SkipBlanks();
      if (AtEnd()) return Error("empty term after ','");
    }
  }

 private:
  absl::Status ParseTerm(v1::DeviceSelector* selector) {
    if (Peek() == ',') return Error("empty term");
    if (Peek() == '!') {
      ++pos_;
      SkipBlanks();
      ASSIGN_OR_RETURN(std::string key, ReadKey());
      AddRequirement(selector, key, v1::LabelRequirement::OPERATOR_DOES_NOT_EXIST, {});
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(std::string key, ReadKey());
    SkipBlanks();
    if (AtEnd() || Peek() == ',') {
      AddRequirement(selector, key, v1::LabelRequirement::OPERATOR_EXISTS, {});
      return absl::OkStatus();
    }
    if (Consume("!=")) {
      ASSIGN_OR_RETURN(std::string value, ReadValue());
      AddRequirement(selector, key, v1::LabelRequirement::OPERATOR_NOT_IN, {value});
      return absl::OkStatus();
    }
    if (Consume("==") || Consume("=")) {
      ASSIGN_OR_RETURN(std::string value, ReadValue());
      AddEquality(selector, key, value);
      return absl::OkStatus();
    }
    if (ConsumeWord("notin")) {
      ASSIGN_OR_RETURN(std::vector<std::string> values, ReadValueSet());
      AddRequirement(selector, key, v1::LabelRequirement::OPERATOR_NOT_IN, std::move(values));
      return absl::OkStatus();
    }
    if (ConsumeWord("in")) {
      ASSIGN_OR_RETURN(std::vector<std::string> values, ReadValueSet());
      AddRequirement(selector, key, v1::LabelRequirement::OPERATOR_IN, std::move(values));
      return absl::OkStatus();
    }
    return Error(absl::StrCat("expected '=', '==', '!=', 'in' or 'notin' after key '", key, "'"));
  }

  absl::StatusOr<std::string> ReadKey() {
    size_t start = pos_;
    while (!AtEnd() && IsKeyChar(Peek())) ++pos_;
    std::string key(text_.substr(start, pos_ - start));
    if (key.empty()) return Error("expected a label key", start);
    absl::Status valid = ValidateLabelKey(key, "key");
    if (!valid.ok()) return Error(valid.message(), start);
    return key;
  }

  absl::StatusOr<std::string> ReadValue() {
    SkipBlanks();
    size_t start = pos_;
    while (!AtEnd() && IsValueChar(Peek())) ++pos_;
    std::string value(text_.substr(start, pos_ - start));
    absl::Status valid = ValidateLabelValue(value, "value");
    if (!valid.ok()) return Error(valid.message(), start);
    return value;
  }

  absl::StatusOr<std::vector<std::string>> ReadValueSet() {
    SkipBlanks();
    if (AtEnd() || Peek() != '(') return Error("expected '(' to open the value set");
    ++pos_;
    std::vector<std::string> values;
    while (true) {
      SkipBlanks();
      if (!AtEnd() && Peek() == ')' && values.empty()) return Error("empty value set");
      ASSIGN_OR_RETURN(std::string value, ReadValue());
      values.push_back(std::move(value));
      SkipBlanks();
      if (AtEnd()) return Error("value set is not closed with ')'");
      if (Peek() == ')') {
        ++pos_;
        return values;
      }
      if (Peek() != ',') return Error("expected ',' or ')' in the value set");
      ++pos_;
    }
  }

  void AddEquality(v1::DeviceSelector* selector, const std::string& key, const std::string& value) {
    auto& labels = *selector->mutable_match_labels();
    auto existing = labels.find(key);
    if (existing == labels.end()) {
      labels[key] = value;
    } else if (existing->second != value) {
      AddRequirement(selector, key, v1::LabelRequirement::OPERATOR_IN, {value});
    }
  }

  static void AddRequirement(v1::DeviceSelector* selector, const std::string& key,
                             v1::LabelRequirement::Operator op, std::vector<std::string> values) {
    v1::LabelRequirement* requirement = selector->add_match_expressions();
    requirement->set_key(key);
    requirement->set_operator_(op);
    for (std::string& value : values) requirement->add_values(std::move(value));
  }

  bool Consume(absl::string_view token) {
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  // An operator word must stand alone: "inside" is not "in" followed by junk.
  bool ConsumeWord(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    size_t after = pos_ + word.size();
    if (after < text_.size() && IsKeyChar(text_[after])) return false;
    pos_ = after;
    return true;
  }

  void SkipBlanks() {
    while (!AtEnd() && IsBlank(Peek())) ++pos_;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }

  absl::Status Error(absl::string_view what) const { return Error(what, pos_); }
  absl::Status Error(absl::string_view what, size_t at) const {
    size_t term_end = text_.find(',', term_start_);
    absl::string_view term_text = text_.substr(term_start_, term_end == absl::string_view::npos
                                                               ? absl::string_view::npos
                                                               : term_end - term_start_);
    return absl::InvalidArgumentError(absl::StrCat("label selector term ", term_, " '", term_text,
                                                   "' at character ", at + 1, ": ", what));
  }

  absl::string_view text_;
  size_t pos_ = 0;
  size_t term_start_ = 0;
  int term_ = 0;
};

bool RequirementHolds(const v1::LabelRequirement& requirement, const Labels& labels) {
  auto found = labels.find(requirement.key());
  bool present = found != labels.end();
  auto value_listed = [&] {
    return std::find(requirement.values().begin(), requirement.values().end(), found->second) !=
           requirement.values().end();
  };
  switch (requirement.operator_()) {
    case v1::LabelRequirement::OPERATOR_IN:
      return present && value_listed();
    case v1::LabelRequirement::OPERATOR_NOT_IN:
      return !present || !value_listed();
    case v1::LabelRequirement::OPERATOR_EXISTS:
      return present;
    case v1::LabelRequirement::OPERATOR_DOES_NOT_EXIST:
      return !present;
    default:
      // Validation refuses unspecified operators; an unvalidated one must
      // select nothing rather than everything.
      return false;
  }
}

}  // namespace

absl::StatusOr<v1::DeviceSelector> ParseLabelSelector(absl::string_view text) {
  return SelectorParser(text).Parse();
}

std::string FormatLabelSelector(const v1::DeviceSelector& selector) {
  std::vector<std::string> terms;
  // Map order is unspecified; sorting keeps the text stable for display.
  std::vector<std::pair<std::string, std::string>> equalities(selector.match_labels().begin(),
                                                              selector.match_labels().end());
  std::sort(equalities.begin(), equalities.end());
  for (const auto& [key, value] : equalities) terms.push_back(absl::StrCat(key, "=", value));
  for (const v1::LabelRequirement& requirement : selector.match_expressions()) {
    std::string values = absl::StrJoin(requirement.values(), ",");
    switch (requirement.operator_()) {
      case v1::LabelRequirement::OPERATOR_IN:
        terms.push_back(absl::StrCat(requirement.key(), " in (", values, ")"));
        break;
      case v1::LabelRequirement::OPERATOR_NOT_IN:
        terms.push_back(requirement.values_size() == 1
                            ? absl::StrCat(requirement.key(), "!=", values)
                            : absl::StrCat(requirement.key(), " notin (", values, ")"));
        break;
      case v1::LabelRequirement::OPERATOR_EXISTS:
        terms.push_back(requirement.key());
        break;
      case v1::LabelRequirement::OPERATOR_DOES_NOT_EXIST:
        terms.push_back(absl::StrCat("!", requirement.key()));
        break;
      default:
        terms.push_back(absl::StrCat(requirement.key(), " <unspecified operator>"));
        break;
    }
  }
  return absl::StrJoin(terms, ",");
}

bool Matches(const v1::DeviceSelector& selector, const Labels& labels,
             policy::HardwareClass hardware_class) {
  if (!selector.hardware_classes().empty()) {
    std::string class_name(policy::HardwareClassName(hardware_class));
    if (std::find(selector.hardware_classes().begin(), selector.hardware_classes().end(),
                  class_name) == selector.hardware_classes().end()) {
      return false;
    }
  }
  return MatchesLabels(selector, labels);
}

bool MatchesLabels(const v1::DeviceSelector& selector, const Labels& labels) {
  for (const auto& [key, value] : selector.match_labels()) {
    auto found = labels.find(key);
    if (found == labels.end() || found->second != value) return false;
  }
  for (const v1::LabelRequirement& requirement : selector.match_expressions()) {
    if (!RequirementHolds(requirement, labels)) return false;
  }
  return true;
}

absl::Status ValidateLabelKey(absl::string_view key, absl::string_view field) {
  if (key.empty()) return InvalidArgumentForField(field, absl::StrCat(field, ": label key is empty"));
  size_t slash = key.find('/');
  absl::string_view name = key;
  if (slash != absl::string_view::npos) {
    absl::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (!IsDnsSubdomain(prefix)) {
      return InvalidArgumentForField(
          field, absl::StrCat(field, ": label key prefix '", prefix,
                       "' must be a lowercase DNS subdomain of at most 253 characters"));
    }
  }
  if (!IsQualifiedName(name)) {
    return InvalidArgumentForField(
        field, absl::StrCat(field, ": label key '", key,
                     "' must be 1..63 characters of [A-Za-z0-9._-] starting and ending "
                     "alphanumeric (after an optional 'prefix/')"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelValue(absl::string_view value, absl::string_view field) {
  if (value.empty() || IsQualifiedName(value)) return absl::OkStatus();
  return InvalidArgumentForField(
      field, absl::StrCat(field, ": label value '", value,
                   "' must be empty or 1..63 characters of [A-Za-z0-9._-] starting and ending "
                   "alphanumeric"));
}

bool IsEmptySelector(const v1::DeviceSelector& selector) {
  return selector.match_labels().empty() && selector.match_expressions().empty() &&
         selector.hardware_classes().empty();
}

absl::Status ValidateDeviceSelector(const v1::DeviceSelector& selector, absl::string_view field) {
  std::vector<std::pair<std::string, std::string>> equalities(selector.match_labels().begin(),
                                                              selector.match_labels().end());
  std::sort(equalities.begin(), equalities.end());
  for (const auto& [key, value] : equalities) {
    std::string entry = absl::StrCat(field, ".match_labels[", key, "]");
    RETURN_IF_ERROR(ValidateLabelKey(key, entry));
    RETURN_IF_ERROR(ValidateLabelValue(value, entry));
  }
  for (int i = 0; i < selector.match_expressions_size(); ++i) {
    const v1::LabelRequirement& requirement = selector.match_expressions(i);
    std::string entry = absl::StrCat(field, ".match_expressions[", i, "]");
    RETURN_IF_ERROR(ValidateLabelKey(requirement.key(), absl::StrCat(entry, ".key")));
    switch (requirement.operator_()) {
      case v1::LabelRequirement::OPERATOR_IN:
      case v1::LabelRequirement::OPERATOR_NOT_IN:
        if (requirement.values().empty()) {
          return InvalidArgumentForField(
              absl::StrCat(entry, ".values"),
              absl::StrCat(entry, ".values: operator ", OperatorName(requirement.operator_()),
                           " needs at least one value"));
        }
        break;
      case v1::LabelRequirement::OPERATOR_EXISTS:
      case v1::LabelRequirement::OPERATOR_DOES_NOT_EXIST:
        if (!requirement.values().empty()) {
          return InvalidArgumentForField(
              absl::StrCat(entry, ".values"),
              absl::StrCat(entry, ".values: operator ", OperatorName(requirement.operator_()),
                           " takes no values"));
        }
        break;
      default:
        return InvalidArgumentForField(
            absl::StrCat(entry, ".operator"),
            absl::StrCat(entry, ".operator: must be IN, NOT_IN, EXISTS or DOES_NOT_EXIST"));
    }
    for (int v = 0; v < requirement.values_size(); ++v) {
      RETURN_IF_ERROR(
          ValidateLabelValue(requirement.values(v), absl::StrCat(entry, ".values[", v, "]")));
    }
  }
  for (int i = 0; i < selector.hardware_classes_size(); ++i) {
    if (!policy::ParseHardwareClass(selector.hardware_classes(i)).ok()) {
      return InvalidArgumentForField(
          absl::StrCat(field, ".hardware_classes[", i, "]"),
          absl::StrCat(field, ".hardware_classes[", i, "]: unknown hardware class '",
          selector.hardware_classes(i),
          "' (expected jetson, cuda_discrete, arm64_cpu, x86_cpu or npu_phone)"));
    }
  }
  if (selector.all() && !IsEmptySelector(selector)) {
    return InvalidArgumentForField(
        absl::StrCat(field, ".all"), absl::StrCat(field, ".all: must not be combined with labels, expressions or hardware classes"));
  }
  return absl::OkStatus();
}

}  // namespace weightpath::deploy
