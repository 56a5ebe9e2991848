// weightpathctl policy plan --policy FILE: what a policy change would do to
// the registered devices before it lands (PlanPolicy).
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

int RunPolicyCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
