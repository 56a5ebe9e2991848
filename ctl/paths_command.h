// weightpathctl paths --profile FILE: every weight path of the server's
// policy for one device, chosen, compatible or incompatible, each with its
// verification evidence (ExplainDecisionResponse.paths).
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

int RunPathsCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
