// Command-line flags for one subcommand: --name value, --name=value, boolean
// --name, and single-letter aliases (-o json). Every subcommand declares its
// flags, so a misspelt flag is an error rather than silently ignored.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace weightpath::ctl {

struct FlagSpec {
  std::string name;        // without dashes: "profile"
  char alias = '\0';       // -o for "output"; '\0' for none
  bool takes_value = true;
  std::string help;        // one line for --help
};

class ParsedArguments {
 public:
  bool Has(std::string_view name) const;
  // The value of a flag that takes one, if given.
  std::optional<std::string> Value(std::string_view name) const;

 private:
  friend absl::StatusOr<ParsedArguments> ParseArguments(const std::vector<std::string>&,
                                                        const std::vector<FlagSpec>&);
  std::map<std::string, std::string, std::less<>> values_;
};

// INVALID_ARGUMENT naming the flag: unknown, given twice, missing its value,
// a value for a boolean flag, or a stray positional argument.
absl::StatusOr<ParsedArguments> ParseArguments(const std::vector<std::string>& args,
                                               const std::vector<FlagSpec>& specs);

// "  --profile FILE   help" lines for a --help screen.
std::string FlagHelp(const std::vector<FlagSpec>& specs);

}  // namespace weightpath::ctl
