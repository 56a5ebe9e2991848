// weightpathctl repo: run a TUF repository of weightpath artifacts.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

// repo init | add-target | remove-target | sign | timestamp | rotate-root | verify
int RunRepoCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
