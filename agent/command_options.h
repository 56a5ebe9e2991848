// What every `weightpath-agent` subcommand does the same way with its
// command line: "--name VALUE" / "--name=VALUE" options and value-less flags,
// --help anywhere, one usage-error line, and one log format on stderr.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weightpath::agent {

class CommandOptions {
 public:
  // True when --help or -h was given, wherever it stood: help wins over
  // every other argument, valid or not.
  bool help() const { return help_; }
  bool Has(const std::string& flag) const { return flags_.count(flag) != 0; }
  // The value of "--name" (dashes included), if given; a repeated option
  // keeps its last value.
  std::optional<std::string> Value(const std::string& name) const;
  std::string ValueOr(const std::string& name, const std::string& fallback) const;

 private:
  friend absl::StatusOr<CommandOptions> ParseCommandOptions(
      int argc, char** argv, std::initializer_list<const char*> value_options,
      std::initializer_list<const char*> flags);
  bool help_ = false;
  std::set<std::string> flags_;
  std::map<std::string, std::string> values_;
};

// argv[0] is the subcommand's name. INVALID_ARGUMENT "unknown argument 'X'"
// or "--name needs a value".
absl::StatusOr<CommandOptions> ParseCommandOptions(
    int argc, char** argv, std::initializer_list<const char*> value_options,
    std::initializer_list<const char*> flags = {});

// "weightpath-agent COMMAND: MESSAGE" and the usage on stderr; returns the
// bad-command-line exit code (2) every subcommand uses.
int UsageError(absl::string_view command, absl::string_view message, const std::string& usage);

// journald stamps each line itself; stderr keeps stdout free for tools.
void LogToStderr();

}  // namespace weightpath::agent
