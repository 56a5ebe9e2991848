#include "common/command_line.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace weightpath {
namespace {

const FlagSpec* FindSpec(const std::vector<FlagSpec>& specs, absl::string_view name) {
  for (const FlagSpec& spec : specs) {
    if (spec.name == name) return &spec;
    if (name.size() == 1 && spec.alias == name[0]) return &spec;
  }
  return nullptr;
}

bool IsHelp(absl::string_view argument) { return argument == "--help" || argument == "-h"; }

}  // namespace

bool ParsedArguments::Has(absl::string_view name) const {
  return values_.find(name) != values_.end();
}

std::optional<std::string> ParsedArguments::Value(absl::string_view name) const {
  const auto found = values_.find(name);
  if (found == values_.end() || found->second.empty()) return std::nullopt;
  return found->second.back();
}

std::string ParsedArguments::ValueOr(absl::string_view name, absl::string_view fallback) const {
  return Value(name).value_or(std::string(fallback));
}

std::vector<std::string> ParsedArguments::Values(absl::string_view name) const {
  const auto found = values_.find(name);
  if (found == values_.end()) return {};
  return found->second;
}

absl::StatusOr<ParsedArguments> ParseArguments(const std::vector<std::string>& args,
                                               const std::vector<FlagSpec>& specs,
                                               absl::string_view word) {
  ParsedArguments parsed;
  if (std::any_of(args.begin(), args.end(), IsHelp)) {
    parsed.help_ = true;
    return parsed;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string name;
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      name = arg.substr(2);
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      name = arg.substr(1);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown ", word, " '", arg, "'"));
    }
    std::optional<std::string> inline_value;
    if (const size_t equals = name.find('='); equals != std::string::npos) {
      inline_value = name.substr(equals + 1);
      name = name.substr(0, equals);
    }
    const FlagSpec* spec = FindSpec(specs, name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown ", word, " '", arg, "'"));
    }
    if (!spec->takes_value && inline_value.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown ", word, " '", arg, "' (--", spec->name, " takes no value)"));
    }
    if (!spec->repeatable && parsed.values_.count(spec->name) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", spec->name, " given twice"));
    }
    std::vector<std::string>& values = parsed.values_[spec->name];
    if (!spec->takes_value) continue;
    if (inline_value.has_value()) {
      values.push_back(*std::move(inline_value));
    } else if (i + 1 < args.size()) {
      values.push_back(args[++i]);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag --", spec->name, " needs a value"));
    }
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

int UsageError(std::ostream& err, absl::string_view who, absl::string_view message,
               absl::string_view usage) {
  err << who << ": " << message;
  if (!usage.empty()) err << "; " << usage.substr(0, usage.find('\n'));
  err << "\n";
  return kExitUsageError;
}

int ShowHelp(std::ostream& out, absl::string_view usage) {
  out << usage;
  return 0;
}

int NoArguments(std::ostream& err, absl::string_view usage) {
  err << usage;
  return kExitUsageError;
}

}  // namespace weightpath
