// weightpathctl devices: the device registry, filtered, as a table or JSON.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

// devices --server ADDR [--class C] [--path P] [--selector S]
//         [--since DURATION] [-o table|json] [--token-file F | --ca C --cert F --key K]
int RunDevicesCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
