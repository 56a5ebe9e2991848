// How a subcommand reports a failure: one line on stderr and an exit code
// chosen from the status code, so scripts can tell bad input from a failure.
#pragma once

#include <ostream>
#include <string_view>

#include "absl/status/status.h"

namespace weightpath::ctl {

// Bad input (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, OUT_OF_RANGE)
// exits kExitUsage; anything else kExitFailure.
int ExitCodeFor(const absl::Status& status);

// Writes "weightpathctl <command>: <message>" as a single line and returns
// ExitCodeFor(status).
int ReportError(std::string_view command, const absl::Status& status, std::ostream& err);

}  // namespace weightpath::ctl
