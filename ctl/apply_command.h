// weightpathctl apply -f FILE|DIR: rollouts from files, created when missing
// and left alone when the server already has the same spec.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

int RunApplyCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
