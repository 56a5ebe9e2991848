// `weightpath-agent run --config FILE [--root DIR] [--once]`: binds the run
// loop to the wall clock, the live probe, the server and /bin/sh.
#pragma once

#include <string>

namespace weightpath::agent {

std::string RunUsage();

// argv as the agent's dispatcher passes it: argv[0] is "run".
int RunRunCommand(int argc, char** argv);

}  // namespace weightpath::agent
