// `weightpath-agent boot --config FILE [--root DIR]`: wires the real clock,
// randomness, hardware probe and gRPC client into the boot flow, and turns
// its outcome into an exit code and a log line.
#pragma once

#include <string>

namespace weightpath::agent {

// The --help text, exit codes included.
std::string BootUsage();

// argv as the agent's dispatcher passes it: argv[0] is "boot".
int RunBootCommand(int argc, char** argv);

}  // namespace weightpath::agent
