// `weightpath-agent trust status [--config FILE] [--root DIR] [-o text|json]`:
// prints TrustStatus (trust_status.h) of the config's trust block.
#pragma once

#include <string>

namespace weightpath::agent {

std::string TrustUsage();

// argv as the agent's dispatcher passes it: argv[0] is "trust".
// Exit 0 with the status printed; 1 when the config is unreadable, has no
// trust block, or neither the state nor trust.root verifies; 2 for a bad
// command line.
int RunTrustCommand(int argc, char** argv);

}  // namespace weightpath::agent
