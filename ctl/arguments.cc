#include "ctl/arguments.h"

#include "absl/strings/str_cat.h"

namespace weightpath::ctl {
namespace {

const FlagSpec* FindSpec(const std::vector<FlagSpec>& specs, std::string_view name) {
  for (const FlagSpec& spec : specs) {
    if (spec.name == name) return &spec;
    if (name.size() == 1 && spec.alias == name[0]) return &spec;
  }
  return nullptr;
}

}  // namespace

bool ParsedArguments::Has(std::string_view name) const {
  return values_.find(name) != values_.end();
}

std::optional<std::string> ParsedArguments::Value(std::string_view name) const {
  auto found = values_.find(name);
  if (found == values_.end()) return std::nullopt;
  return found->second;
}

absl::StatusOr<ParsedArguments> ParseArguments(const std::vector<std::string>& args,
                                               const std::vector<FlagSpec>& specs) {
  ParsedArguments parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string name;
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      name = arg.substr(2);
    } else if (arg.size() == 2 && arg[0] == '-' && arg[1] != '-') {
      name = arg.substr(1);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    if (size_t equals = name.find('='); equals != std::string::npos) {
      inline_value = name.substr(equals + 1);
      name = name.substr(0, equals);
    }
    const FlagSpec* spec = FindSpec(specs, name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "'"));
    }
    if (parsed.values_.count(spec->name) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", spec->name, " given twice"));
    }
    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", spec->name, " needs a value"));
      }
    } else if (inline_value) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", spec->name, " takes no value"));
    }
    parsed.values_.emplace(spec->name, std::move(value));
  }
  return parsed;
}

std::string FlagHelp(const std::vector<FlagSpec>& specs) {
  std::string help;
  for (const FlagSpec& spec : specs) {
    std::string left = spec.alias != '\0' ? absl::StrCat("-", std::string(1, spec.alias), ", --")
                                          : std::string("    --");
    absl::StrAppend(&left, spec.name, spec.takes_value ? " VALUE" : "");
    left.resize(std::max<size_t>(left.size() + 2, 26), ' ');
    absl::StrAppend(&help, "  ", left, spec.help, "\n");
  }
  return help;
}

}  // namespace weightpath::ctl
