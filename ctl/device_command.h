// weightpathctl device show ID: one device's registry record, its last
// decision and what the server holds about its measurements.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

int RunDeviceCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
