// weightpathctl audit: the FleetAdmin audit trail (ListAuditEvents), who
// called which mutating RPC on what, and what the server answered.
#pragma once

#include <string>
#include <vector>

#include "ctl/command.h"

namespace weightpath::ctl {

// audit [--since DURATION|RFC3339] [--limit N] [-o table|json|yaml] [--server ADDR]
int RunAuditCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace weightpath::ctl
