// weightpathctl summary: device counts by hardware class x path.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

// summary --server ADDR [--since DURATION] [-o table|json] [--token-file F | --ca C --cert F --key K]
int RunSummaryCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
