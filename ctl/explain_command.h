// weightpathctl explain DEVICE_ID | --profile FILE: why the server decides
// what it decides for a device (ExplainDecision).
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

int RunExplainCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
