#include "tests/helm/chart_text.h"

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace weightpath::helm_test {

absl::StatusOr<std::string> ReadFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

YAML::Node ValueAt(const YAML::Node& root, const std::string& dotted_path) {
  // Clone so that walking never inserts into (or aliases) the caller's tree.
  YAML::Node node = YAML::Clone(root);
  for (absl::string_view part : absl::StrSplit(dotted_path, '.')) {
    const std::string key(part);
    if (!node.IsMap() || !node[key]) return YAML::Node(YAML::NodeType::Undefined);
    node = node[key];
  }
  return node;
}

namespace {

std::map<std::string, std::string> StringVariables(const std::string& text) {
  static const std::regex kAssignment(R"re(\{\{-?\s*\$(\w+)\s*:=\s*"([^"]*)"\s*-?\}\})re");
  std::map<std::string, std::string> variables;
  for (std::sregex_iterator it(text.begin(), text.end(), kAssignment), end; it != end; ++it) {
    variables[(*it)[1].str()] = (*it)[2].str();
  }
  return variables;
}

}  // namespace

std::string SubstituteSimpleReferences(const std::string& template_text,
                                       const YAML::Node& values) {
  static const std::regex kReference(
      R"re(\{\{-?\s*(?:int\s+)?(\.Values\.[\w.]+|\$\w+)\s*-?\}\})re");
  const std::map<std::string, std::string> variables = StringVariables(template_text);
  std::string out;
  auto last = template_text.cbegin();
  for (std::sregex_iterator it(template_text.begin(), template_text.end(), kReference), end;
       it != end; ++it) {
    const std::smatch& match = *it;
    out.append(last, match[0].first);
    last = match[0].second;
    const std::string reference = match[1].str();
    std::string replacement = match[0].str();
    if (reference[0] == '$') {
      auto variable = variables.find(reference.substr(1));
      if (variable != variables.end()) replacement = variable->second;
    } else {
      const YAML::Node value = ValueAt(values, reference.substr(std::string(".Values.").size()));
      if (value.IsDefined() && value.IsScalar()) replacement = value.Scalar();
    }
    out += replacement;
  }
  out.append(last, template_text.cend());
  return out;
}

std::set<std::string> FlagNamesUsed(const std::string& text) {
  // A flag starts after a quote, a bracket, a space or a line start, which
  // keeps YAML document separators and "{{-" trims out.
  static const std::regex kFlag(R"re((?:^|[\s"'\[])--([a-z][a-z0-9_]*))re");
  std::set<std::string> names;
  for (std::sregex_iterator it(text.begin(), text.end(), kFlag), end; it != end; ++it) {
    names.insert((*it)[1].str());
  }
  return names;
}

}  // namespace weightpath::helm_test
