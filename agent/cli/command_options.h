// How every `weightpath-agent` subcommand reads its command line: the one
// parser of common/command_line.h (its rules for unknown, repeated and
// value-less flags and --help), with the agent's own way of naming options
// ("--config", dashes included) and its usage-error line.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/command_line.h"

namespace weightpath::agent {

class CommandOptions {
 public:
  // True when --help or -h was given, wherever it stood: help wins over
  // every other argument, valid or not.
  bool help() const { return parsed_.help(); }
  bool Has(const std::string& flag) const;
  // The value of "--name" (dashes included), if given.
  std::optional<std::string> Value(const std::string& name) const;
  std::string ValueOr(const std::string& name, const std::string& fallback) const;
  // Every value of a repeatable option, in order.
  std::vector<std::string> Values(const std::string& name) const;

 private:
  friend absl::StatusOr<CommandOptions> ParseCommandOptions(
      int argc, char** argv, std::initializer_list<const char*> value_options,
      std::initializer_list<const char*> flags,
      std::initializer_list<const char*> repeatable_options);
  ParsedArguments parsed_;
};

// argv[0] is the subcommand's name; options are named with their dashes
// ("--config", "-o"). INVALID_ARGUMENT "unknown argument 'X'", "flag --X
// needs a value" or "flag --X given twice" (unless it is one of
// `repeatable_options`, which take a value each time).
absl::StatusOr<CommandOptions> ParseCommandOptions(
    int argc, char** argv, std::initializer_list<const char*> value_options,
    std::initializer_list<const char*> flags = {},
    std::initializer_list<const char*> repeatable_options = {});

// "weightpath-agent COMMAND: MESSAGE; <usage's first line>" on stderr
// (common/command_line.h); returns the bad-command-line exit code (2).
int UsageError(absl::string_view command, absl::string_view message, const std::string& usage);

}  // namespace weightpath::agent
