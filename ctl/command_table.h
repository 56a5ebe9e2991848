// The subcommands of weightpathctl and the dispatch from argv to them.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

const std::vector<Command>& Commands();

// `args` excludes the program name: {"resolve", "--offline", ...}.
int Dispatch(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
