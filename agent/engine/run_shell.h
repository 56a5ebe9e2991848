// Running the operator's configured commands (apply_command,
// engine_check_command) through /bin/sh, as a unit's ExecStart would.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace weightpath::agent {

// Runs `/bin/sh -c command` and waits for it. OK on exit status 0;
// otherwise ABORTED naming `what` (the config key) and the exit status or
// signal, so a report's detail says which command failed and how.
absl::Status RunShellCommand(const std::string& command, const std::string& what);

}  // namespace weightpath::agent
