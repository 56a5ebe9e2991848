// How a subcommand reports a failure: one line on stderr and an exit code
// chosen by where the failure came from, so a script can tell a command line
// to fix (2) from a server that said no or could not be reached (1).
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

// kExitOk for OK. A status that came back from a call to the server
// (common/grpc_status.h ReceivedFrom) is kExitFailure whatever its code: the
// server refused or failed, and the command line may well be right. A status
// weightpathctl made itself is kExitUsage when it says the command line or an
// input file it names is wrong (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED,
// OUT_OF_RANGE: a flag value, a missing argument, a file that is absent,
// unreadable or invalid), and kExitFailure otherwise (credentials that cannot
// be used, output that cannot be written).
int ExitCodeFor(const absl::Status& status);

// Writes "weightpathctl <command>: <message>" as a single line and returns
// ExitCodeFor(status). A status from the server is written with its gRPC
// code after the call's name: "weightpathctl rollout: PauseRollout:
// FAILED_PRECONDITION: rollout 'r1' is COMPLETED".
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
