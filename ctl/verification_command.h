// weightpathctl verification: the verification matrix rebuilt from what the
// fleet measured (path x hardware class x CPU model).
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

// verification --server ADDR [-o table|json] [--token-file F | --ca C --cert F --key K]
int RunVerificationCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
