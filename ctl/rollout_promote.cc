#include "ctl/rollout_promote.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ctl/rollout_view.h"
#include "policy/hardware_class.h"
#include "policy/policy.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::ctl {
namespace {

// A rule covers one combination of an `In`'s values at a time.
constexpr size_t kMaxVariants = 16;

// One conjunction of the selector a rule's match can say.
struct Variant {
  std::map<std::string, std::string> labels;
  std::vector<std::string> classes;  // empty: any class
};

absl::StatusOr<std::vector<Variant>> SelectorVariants(const v1::Rollout& rollout) {
  const v1::DeviceSelector& selector = rollout.selector();
  Variant base;
  for (const auto& [key, value] : selector.match_labels()) base.labels[key] = value;
  base.classes.assign(selector.hardware_classes().begin(), selector.hardware_classes().end());
  std::sort(base.classes.begin(), base.classes.end());
  base.classes.erase(std::unique(base.classes.begin(), base.classes.end()), base.classes.end());
  std::vector<Variant> variants = {base};
  for (int i = 0; i < selector.match_expressions_size(); ++i) {
    const v1::LabelRequirement& requirement = selector.match_expressions(i);
    if (requirement.operator_() != v1::LabelRequirement::OPERATOR_IN) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rollout '", rollout.id(), "': selector.match_expressions[", i, "] (",
          v1::LabelRequirement::Operator_Name(requirement.operator_()), " on '",
          requirement.key(),
          "') has no equivalent in a policy rule, whose labels match exact values only; "
          "write the rule by hand (policy/README.md, \"Policy document schema\")"));
    }
    std::vector<Variant> next;
    for (const Variant& variant : variants) {
      for (const std::string& value : requirement.values()) {
        auto found = variant.labels.find(requirement.key());
        if (found != variant.labels.end() && found->second != value) continue;  // matches nothing
        Variant narrowed = variant;
        narrowed.labels[requirement.key()] = value;
        next.push_back(std::move(narrowed));
      }
    }
    variants = std::move(next);
    if (variants.size() > kMaxVariants) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rollout '", rollout.id(), "': selector.match_expressions: their values make more than ",
          kMaxVariants, " label combinations, each a rule; write the rules by hand"));
    }
  }
  if (variants.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rollout '", rollout.id(), "': selector matches no device (match_labels and "
                     "match_expressions contradict): nothing to promote"));
  }
  return variants;
}

// The names of a scalar-or-list key, as written.
std::vector<std::string> ListOf(const YAML::Node& node) {
  std::vector<std::string> items;
  if (!node) return items;
  if (node.IsScalar()) {
    items.push_back(node.as<std::string>());
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) items.push_back(item.as<std::string>());
  }
  return items;
}

YAML::Node FlowList(const std::vector<std::string>& items) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const std::string& item : items) list.push_back(item);
  list.SetStyle(YAML::EmitterStyle::Flow);
  return list;
}

// `rule` narrowed to `variant`; false when the two match no device together.
bool Narrow(const Variant& variant, YAML::Node* rule) {
  YAML::Node match = (*rule)["match"];
  if (!match || match.IsNull()) {
    match = YAML::Node(YAML::NodeType::Map);
  }
  if (!variant.classes.empty()) {
    std::vector<std::string> classes = variant.classes;
    if (match["hardware_class"]) {
      const std::vector<std::string> own = ListOf(match["hardware_class"]);
      classes.erase(std::remove_if(classes.begin(), classes.end(),
                                   [&own](const std::string& name) {
                                     return std::find(own.begin(), own.end(), name) == own.end();
                                   }),
                    classes.end());
      if (classes.empty()) return false;
    }
    match["hardware_class"] = FlowList(classes);
  }
  if (!variant.labels.empty()) {
    YAML::Node labels = match["labels"];
    if (!labels || !labels.IsMap()) labels = YAML::Node(YAML::NodeType::Map);
    for (const auto& [key, value] : variant.labels) {
      if (labels[key] && labels[key].as<std::string>() != value) return false;
      labels[key] = value;
    }
    match["labels"] = labels;
  }
  if (match.size() > 0) (*rule)["match"] = match;
  return true;
}

std::string PriorityName(v1::Priority priority) {
  return priority == v1::PRIORITY_FIDELITY ? "fidelity" : "speed";
}

std::string SelectorText(const v1::Rollout& rollout) {
  const v1::DeviceSelector& selector = rollout.selector();
  std::vector<std::string> parts;
  for (const auto& [key, value] : selector.match_labels()) parts.push_back(key + "=" + value);
  for (const v1::LabelRequirement& requirement : selector.match_expressions()) {
    parts.push_back(absl::StrCat(requirement.key(), " in (",
                                 absl::StrJoin(requirement.values(), ","), ")"));
  }
  if (!selector.hardware_classes().empty()) {
    parts.push_back(absl::StrCat("class in (", absl::StrJoin(selector.hardware_classes(), ","), ")"));
  }
  return parts.empty() ? std::string("every device") : absl::StrJoin(parts, ", ");
}

std::string ActionText(const v1::RolloutAction& action) {
  switch (action.action_case()) {
    case v1::RolloutAction::kSetPriority:
      return absl::StrCat("set_priority ", PriorityName(action.set_priority()));
    case v1::RolloutAction::kPinPath:
      return absl::StrCat("pin_path ", action.pin_path());
    case v1::RolloutAction::kPinArtifact:
      return "pin_artifact";
    default:
      return "no action";
  }
}

// The comment above the rules: what they stand for and what to do next.
std::string Header(const v1::Rollout& rollout, const std::string& document_path) {
  std::string text = absl::StrCat(
      "# Promoted from rollout '", rollout.id(), "': ", ActionText(rollout.action()), "\n",
      "# for ", SelectorText(rollout), ".\n"
      "# These rules go first under rules: (the first match wins, as a rollout\n"
      "# overrides every rule). Before loading, check what they move:\n"
      "#   weightpathctl policy plan --policy ",
      document_path.empty() ? std::string("FILE") : document_path + " (this output)",
      "\n# and once it is loaded, delete the rollout (it then moves no device):\n"
      "#   weightpathctl rollout delete ", rollout.id(), "\n");
  if (rollout.state() != v1::ROLLOUT_STATE_COMPLETED) {
    absl::StrAppend(&text, "# The rollout is ", RolloutStateName(rollout.state()),
                    ", not COMPLETED: these rules reach every selected device, not only the\n"
                    "# members of its current stage.\n");
  }
  return text;
}

// The classes some rule of `policy` gives `path_id` to; every class when a
// rule routing it names none.
std::set<std::string> ClassesRouted(const policy::Policy& policy, const std::string& path_id) {
  std::set<std::string> classes;
  for (const policy::Rule& rule : policy.rules()) {
    if (rule.path_id != path_id) continue;
    if (rule.match.hardware_classes.empty()) {
      for (policy::HardwareClass each : policy::kAllHardwareClasses) {
        classes.insert(std::string(policy::HardwareClassName(each)));
      }
    }
    for (policy::HardwareClass each : rule.match.hardware_classes) {
      classes.insert(std::string(policy::HardwareClassName(each)));
    }
  }
  return classes;
}

std::string UniqueName(const std::string& wanted, std::set<std::string>* taken) {
  std::string name = wanted;
  for (int n = 2; taken->count(name) > 0; ++n) name = absl::StrCat(wanted, "-", n);
  taken->insert(name);
  return name;
}

// The rules, as block YAML items ("- name: ...") each line after `indent`.
std::string EmitRules(const std::vector<YAML::Node>& rules, const std::string& indent) {
  YAML::Emitter out;
  out << YAML::BeginSeq;
  for (const YAML::Node& rule : rules) out << rule;
  out << YAML::EndSeq;
  std::string text;
  for (absl::string_view line : absl::StrSplit(out.c_str(), '\n')) {
    if (line.empty()) continue;
    absl::StrAppend(&text, indent, line, "\n");
  }
  return text;
}

// Where the rules go in `document`: just after the top-level `rules:`
// line, at the indent of its first item.
absl::StatusOr<std::pair<size_t, std::string>> RulesInsertion(const std::string& document,
                                                              const std::string& path) {
  size_t at = 0;
  int line_number = 0;
  while (at < document.size()) {
    size_t end = document.find('\n', at);
    if (end == std::string::npos) end = document.size();
    ++line_number;
    const absl::string_view line(document.data() + at, end - at);
    if (absl::StartsWith(line, "rules:")) {
      absl::string_view rest = absl::StripAsciiWhitespace(line.substr(6));
      if (!rest.empty() && rest.front() != '#') {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", line_number, ": rules: is not a block list (\"- name: ...\" items); add "
            "the promoted rules by hand"));
      }
      // The first item's indent.
      size_t next = end + 1;
      while (next < document.size()) {
        size_t next_end = document.find('\n', next);
        if (next_end == std::string::npos) next_end = document.size();
        const absl::string_view item(document.data() + next, next_end - next);
        const absl::string_view stripped = absl::StripLeadingAsciiWhitespace(item);
        if (!stripped.empty() && stripped.front() != '#') {
          if (stripped.front() != '-') break;
          return std::make_pair(end + 1, std::string(item.substr(0, item.size() - stripped.size())));
        }
        next = next_end + 1;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_number, ": rules: has no \"- name: ...\" item after it; add the "
          "promoted rules by hand"));
    }
    at = end + 1;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": no top-level rules: key (policy/README.md, \"Policy document schema\")"));
}

}  // namespace

absl::StatusOr<Promotion> PromoteToPolicy(const v1::Rollout& rollout,
                                          const std::optional<std::string>& document,
                                          const std::string& document_path) {
  const v1::RolloutAction& action = rollout.action();
  if (action.has_pin_artifact()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout '", rollout.id(), "': action.pin_artifact has no policy equivalent: a rule "
        "chooses a path, the catalog its build. Make it permanent in the catalog (publish the "
        "build as path '", action.pin_artifact().path(), "''s artifact), then delete the rollout"));
  }
  if (!action.has_pin_path() && !action.has_set_priority()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rollout '", rollout.id(), "': action: none set, nothing to promote"));
  }
  if (action.has_set_priority() && !document.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout '", rollout.id(), "' sets priority ", PriorityName(action.set_priority()),
        ": --policy FILE (the served policy document) is required, its rules matching at that "
        "priority are what the selected devices get"));
  }
  absl::StatusOr<std::vector<Variant>> variants = SelectorVariants(rollout);
  if (!variants.ok()) return variants.status();

  std::shared_ptr<const policy::Policy> served;
  YAML::Node root;
  std::set<std::string> taken;
  if (document.has_value()) {
    absl::StatusOr<std::shared_ptr<const policy::Policy>> loaded =
        policy::LoadPolicy(*document, document_path);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--policy: ", loaded.status().message()));
    }
    served = *std::move(loaded);
    for (const policy::Rule& rule : served->rules()) taken.insert(rule.name);
    try {
      root = YAML::Load(*document);
    } catch (const YAML::Exception& error) {
      return absl::InvalidArgumentError(absl::StrCat("--policy ", document_path, ": ", error.what()));
    }
  }

  std::vector<YAML::Node> rules;
  const std::string base = absl::StrCat("rollout-", rollout.id());
  if (action.has_pin_path()) {
    const std::string& path_id = action.pin_path();
    std::set<std::string> routed;
    if (served != nullptr) {
      if (served->FindPath(path_id) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rollout '", rollout.id(), "': action.pin_path '", path_id, "' is not a path of ",
            document_path, ": the rollout shapes nothing under it"));
      }
      routed = ClassesRouted(*served, path_id);
    }
    for (const Variant& selected : *variants) {
      Variant variant = selected;
      if (served != nullptr) {
        // A pin applies only where a rule gives the path to the class.
        std::vector<std::string> classes;
        if (variant.classes.empty()) {
          if (routed.size() < policy::kAllHardwareClasses.size()) {
            classes.assign(routed.begin(), routed.end());
          }
        } else {
          for (const std::string& name : variant.classes) {
            if (routed.count(name) > 0) classes.push_back(name);
          }
        }
        if (classes.empty() && (!variant.classes.empty() || routed.empty())) continue;
        variant.classes = classes;
      }
      YAML::Node rule(YAML::NodeType::Map);
      rule["name"] = UniqueName(base, &taken);
      if (!Narrow(variant, &rule)) continue;
      rule["path"] = path_id;
      rules.push_back(rule);
    }
    if (rules.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rollout '", rollout.id(), "': no rule of ", document_path, " gives path '", path_id,
          "' to a class the selector names, so the pin moves no device: nothing to promote"));
    }
  } else {
    const std::string priority = PriorityName(action.set_priority());
    const YAML::Node listed = root["rules"];
    if (!listed || !listed.IsSequence()) {
      return absl::InvalidArgumentError(absl::StrCat("--policy ", document_path, ": rules: not a list"));
    }
    for (const Variant& variant : *variants) {
      for (const YAML::Node& original : listed) {
        const YAML::Node match = original["match"];
        if (match && match["priority"]) {
          bool at_priority = false;
          for (const std::string& each : ListOf(match["priority"])) {
            if (absl::AsciiStrToLower(each) == priority) at_priority = true;
          }
          if (!at_priority) continue;
        }
        YAML::Node rule = YAML::Clone(original);
        if (rule["match"] && rule["match"]["priority"]) rule["match"].remove("priority");
        if (rule["match"] && rule["match"].size() == 0) rule.remove("match");
        if (!Narrow(variant, &rule)) continue;
        rule["name"] = UniqueName(absl::StrCat(base, "-", original["name"].as<std::string>()),
                                  &taken);
        rules.push_back(rule);
      }
    }
  }

  Promotion promotion;
  promotion.rules = static_cast<int>(rules.size());
  if (!document.has_value()) {
    promotion.text = absl::StrCat(
        Header(rollout, ""),
        "# The pin applies only to the classes some rule gives the path to: with\n"
        "# --policy FILE the classes are checked and the whole document printed.\n",
        EmitRules(rules, "  "));
    return promotion;
  }
  absl::StatusOr<std::pair<size_t, std::string>> insertion =
      RulesInsertion(*document, document_path);
  if (!insertion.ok()) return insertion.status();
  const auto& [offset, indent] = *insertion;
  std::string header;
  for (absl::string_view line : absl::StrSplit(Header(rollout, document_path), '\n')) {
    if (!line.empty()) absl::StrAppend(&header, indent, line, "\n");
  }
  std::string text = absl::StrCat(document.value().substr(0, offset), header,
                                  EmitRules(rules, indent), "\n", document.value().substr(offset));
  // The document must load as the server would load it.
  absl::StatusOr<std::shared_ptr<const policy::Policy>> promoted =
      policy::LoadPolicy(text, document_path + " (promoted)");
  if (!promoted.ok()) {
    return absl::InternalError(absl::StrCat(
        "the document with the promoted rules does not load: ", promoted.status().message()));
  }
  promotion.text = std::move(text);
  return promotion;
}

}  // namespace weightpath::ctl
