#include "tests/helm/chart_args.h"

#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/helm/chart_text.h"

namespace weightpath::helm_test {
namespace {

// Go templates treat false, 0, "" and a missing value as false.
bool IsTruthy(const YAML::Node& value) {
  if (!value.IsDefined() || value.IsNull()) return false;
  if (!value.IsScalar()) return value.size() > 0;
  const std::string& text = value.Scalar();
  return !(text.empty() || text == "false" || text == "0");
}

absl::StatusOr<bool> EvaluateCondition(const std::string& condition, const YAML::Node& values,
                                       const std::string& place) {
  static const std::regex kTruthy(R"re(\.Values\.([\w.]+))re");
  static const std::regex kEquals(R"re(eq \.Values\.([\w.]+) "([^"]*)")re");
  std::smatch match;
  if (std::regex_match(condition, match, kTruthy)) {
    return IsTruthy(ValueAt(values, match[1].str()));
  }
  if (std::regex_match(condition, match, kEquals)) {
    const YAML::Node value = ValueAt(values, match[1].str());
    return value.IsDefined() && value.IsScalar() && value.Scalar() == match[2].str();
  }
  return absl::InvalidArgumentError(absl::StrCat(place, ": unsupported condition: ", condition));
}

struct Branch {
  bool parent_active;
  bool taken;   // some branch of this if already matched
  bool active;  // the current branch is rendered
};

int Indentation(const std::string& line) {
  return static_cast<int>(line.find_first_not_of(' '));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> RenderContainerArgs(const std::string& deployment_text,
                                                              const YAML::Node& values) {
  const std::string text = SubstituteSimpleReferences(deployment_text, values);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n');
  size_t index = 0;
  while (index < lines.size() && absl::StripAsciiWhitespace(lines[index]) != "args:") ++index;
  if (index == lines.size()) return absl::InvalidArgumentError("deployment.yaml: no args: list");
  const int args_indentation = Indentation(lines[index]);

  static const std::regex kIf(R"re(\{\{-?\s*if (.+?)\s*-?\}\})re");
  static const std::regex kElseIf(R"re(\{\{-?\s*else if (.+?)\s*-?\}\})re");
  static const std::regex kElse(R"re(\{\{-?\s*else\s*-?\}\})re");
  static const std::regex kEnd(R"re(\{\{-?\s*end\s*-?\}\})re");
  static const std::regex kItem(R"re(- "([^"]*)")re");
  std::vector<Branch> branches;
  std::vector<std::string> args;
  for (++index; index < lines.size(); ++index) {
    const std::string& line = lines[index];
    const std::string place = absl::StrCat("deployment.yaml args line ", index + 1);
    const std::string body(absl::StripAsciiWhitespace(line));
    if (body.empty() || body[0] == '#') continue;
    const bool is_action = absl::StartsWith(body, "{{");
    if (!is_action && Indentation(line) <= args_indentation) break;  // the next key
    // An action indented like "args:" itself still belongs to the list when
    // a block is open; otherwise the list ended above it.
    if (is_action && Indentation(line) <= args_indentation && branches.empty()) break;
    const bool active = branches.empty() || branches.back().active;
    std::smatch match;
    if (std::regex_match(body, match, kIf)) {
      absl::StatusOr<bool> holds = EvaluateCondition(match[1].str(), values, place);
      if (!holds.ok()) return holds.status();
      branches.push_back({active, active && *holds, active && *holds});
    } else if (std::regex_match(body, match, kElseIf)) {
      if (branches.empty()) return absl::InvalidArgumentError(place + ": else if without if");
      absl::StatusOr<bool> holds = EvaluateCondition(match[1].str(), values, place);
      if (!holds.ok()) return holds.status();
      Branch& branch = branches.back();
      branch.active = branch.parent_active && !branch.taken && *holds;
      branch.taken = branch.taken || branch.active;
    } else if (std::regex_match(body, kElse)) {
      if (branches.empty()) return absl::InvalidArgumentError(place + ": else without if");
      Branch& branch = branches.back();
      branch.active = branch.parent_active && !branch.taken;
      branch.taken = true;
    } else if (std::regex_match(body, kEnd)) {
      if (branches.empty()) return absl::InvalidArgumentError(place + ": end without if");
      branches.pop_back();
    } else if (std::regex_match(body, match, kItem)) {
      if (!active) continue;
      if (absl::StrContains(match[1].str(), "{{")) {
        return absl::InvalidArgumentError(absl::StrCat(place, ": unresolved action in ", body));
      }
      args.push_back(match[1].str());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(place, ": not an args item: ", body));
    }
  }
  if (!branches.empty()) return absl::InvalidArgumentError("deployment.yaml args: unclosed if");
  return args;
}

}  // namespace weightpath::helm_test
