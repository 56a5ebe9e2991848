// weightpathctl resolve: which weight path a device profile gets.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

// resolve --offline --profile FILE [--priority speed|fidelity]
//         [--policy FILE] [--labels k=v,...] [-o json|text]
int RunResolveCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
