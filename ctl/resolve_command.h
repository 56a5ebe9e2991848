// weightpathctl resolve: which weight path a device profile gets.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

// resolve --offline --profile FILE [--priority speed|fidelity]
//         [--policy FILE] [--labels k=v,...] [-o json|text]
// resolve [--server ADDR] [--device-id ID] [--dry-run] --profile FILE ...:
// asks the server; a dry run (the default without --device-id) is answered
// but not recorded (ResolveWeightPathRequest.dry_run).
int RunResolveCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
