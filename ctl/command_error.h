// How a subcommand reports a failure: one line on stderr and an exit code
// chosen from the status code, so scripts can tell bad input from a failure.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/command_line.h"
#include "ctl/command.h"

namespace weightpath::ctl {

// Bad input (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, OUT_OF_RANGE)
// exits kExitUsage; anything else kExitFailure.
int ExitCodeFor(const absl::Status& status);

// Writes "weightpathctl <command>: <message>" as a single line and returns
// ExitCodeFor(status).
int ReportError(std::string_view command, const absl::Status& status, std::ostream& err);

// A subcommand's flags read by the one parser (common/command_line.h).
// nullopt when the command is to end at once with `*exit_code`: a bad command
// line, written as one line "weightpathctl <command>: <message>" (exit 2), or
// --help, `write_help` writing to stdout (exit 0).
std::optional<ParsedArguments> ParseFlags(std::string_view command,
                                          const std::vector<std::string>& args,
                                          const std::vector<FlagSpec>& flags,
                                          const std::function<void(std::ostream&)>& write_help,
                                          CommandIo io, int* exit_code);

}  // namespace weightpath::ctl
