// weightpathctl rollout create -f FILE | status ID | list | pause ID |
// resume ID | advance ID | abort ID, against a server's FleetAdmin.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

int RunRolloutCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
