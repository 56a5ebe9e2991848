// The one command-line parser of weightpathctl and weightpath-agent (its
// subcommands and the probe): "--name VALUE", "--name=VALUE", value-less
// flags, single-letter aliases ("-o json"), and one convention for what a
// command line may not do and how a command says so.
//
// The rules, the same in every command:
//  - every flag is declared, so a misspelt one is an error, not ignored;
//  - a flag given twice is refused naming it, unless it is declared
//    repeatable (then Values() has each value in order): a second --config
//    is far more often a mistake in a script than an intended override;
//  - --help or -h anywhere wins over every other argument, valid or not;
//  - a usage error is one line on stderr (what is wrong, then the command's
//    synopsis) and exit code 2 (kExitUsageError), so a script's log shows
//    it whole; a program run with no arguments at all writes its usage to
//    stderr and exits 2; --help writes the usage to stdout and exits 0.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weightpath {

// The exit code of a bad command line, in every program.
inline constexpr int kExitUsageError = 2;

struct FlagSpec {
  std::string name;         // without dashes: "profile"
  char alias = '\0';        // -o for "output"; '\0' for none
  bool takes_value = true;  // false: a value-less flag ("--once")
  std::string help;         // one line for FlagHelp
  bool repeatable = false;  // may be given more than once
};

class ParsedArguments {
 public:
  // --help or -h was given, wherever it stood.
  bool help() const { return help_; }
  // `name` without dashes, as declared.
  bool Has(absl::string_view name) const;
  // The value of a flag that takes one, if given (a repeatable flag: its
  // last value; Values() has them all).
  std::optional<std::string> Value(absl::string_view name) const;
  std::string ValueOr(absl::string_view name, absl::string_view fallback) const;
  // Every value given, in order; empty when the flag was not given.
  std::vector<std::string> Values(absl::string_view name) const;

 private:
  friend absl::StatusOr<ParsedArguments> ParseArguments(const std::vector<std::string>&,
                                                        const std::vector<FlagSpec>&,
                                                        absl::string_view);
  bool help_ = false;
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
};

// `args` are the command's own arguments (no program or command name).
// INVALID_ARGUMENT naming the argument: "unknown <word> 'X'" for an
// undeclared flag, a stray positional argument or a value given to a
// value-less flag (`word` is what the program calls its arguments:
// weightpathctl "flag", weightpath-agent "argument"), "flag --X needs a
// value", "flag --X given twice".
absl::StatusOr<ParsedArguments> ParseArguments(const std::vector<std::string>& args,
                                               const std::vector<FlagSpec>& specs,
                                               absl::string_view word = "flag");

// "  -o, --output VALUE      help" lines for a --help screen.
std::string FlagHelp(const std::vector<FlagSpec>& specs);

// Writes "<who>: <message>" as one line to `err`, followed by "; " and the
// first line of `usage` (its synopsis, "usage: ...") when one is given, and
// returns kExitUsageError. `who` is the program and command ("weightpathctl
// resolve").
int UsageError(std::ostream& err, absl::string_view who, absl::string_view message,
               absl::string_view usage = {});

// --help: `usage` to `out`, exit code 0.
int ShowHelp(std::ostream& out, absl::string_view usage);

// No arguments at all: `usage` to `err`, kExitUsageError.
int NoArguments(std::ostream& err, absl::string_view usage);

}  // namespace weightpath
