#include "ctl/command_table.h"

#include <algorithm>

#include "ctl/apply_command.h"
#include "ctl/audit_command.h"
#include "ctl/device_command.h"
#include "ctl/devices_command.h"
#include "ctl/explain_command.h"
#include "ctl/paths_command.h"
#include "ctl/policy_command.h"
#include "ctl/repo_command.h"
#include "ctl/resolve_command.h"
#include "ctl/rollout_command.h"
#include "ctl/summary_command.h"
#include "ctl/verification_command.h"

namespace weightpath::ctl {
namespace {

void WriteUsage(std::ostream& out) {
  out << "usage: weightpathctl <command> [flags]\n\ncommands:\n";
  for (const Command& command : Commands()) {
    out << "  " << command.name << std::string(12 - std::min<size_t>(command.name.size(), 11), ' ')
        << command.summary << "\n";
  }
  out << "\nRun 'weightpathctl <command> --help' for the flags of one command.\n";
}

}  // namespace

const std::vector<Command>& Commands() {
  // One line per subcommand; keep alphabetical.
  static const std::vector<Command> commands = {
      {"apply", "create rollouts from YAML files (idempotent)", RunApplyCommand},
      {"audit", "who called which mutating FleetAdmin RPC, and the answer", RunAuditCommand},
      {"device", "one device: registry record, last decision, measurements", RunDeviceCommand},
      {"devices", "list the devices the fleet registry knows", RunDevicesCommand},
      {"explain", "why the server decides what it decides for a device", RunExplainCommand},
      {"paths", "every weight path of the policy for a device or profile, and why", RunPathsCommand},
      {"policy", "plan a policy change: which registered devices would move", RunPolicyCommand},
      {"repo", "run a signed (TUF) repository of artifacts", RunRepoCommand},
      {"resolve", "decide the weight path for a device profile", RunResolveCommand},
      {"rollout", "create, watch and steer staged rollouts", RunRolloutCommand},
      {"summary", "count devices by hardware class and path", RunSummaryCommand},
      {"verification", "the verification matrix rebuilt from fleet reports", RunVerificationCommand},
  };
  return commands;
}

int Dispatch(const std::vector<std::string>& args, CommandIo io) {
  if (args.empty()) {
    WriteUsage(io.err);
    return kExitUsage;
  }
  const std::string& name = args.front();
  if (name == "help" || name == "--help" || name == "-h") {
    WriteUsage(io.out);
    return kExitOk;
  }
  for (const Command& command : Commands()) {
    if (command.name == name) {
      return command.run(std::vector<std::string>(args.begin() + 1, args.end()), io);
    }
  }
  io.err << "weightpathctl: unknown command '" << name << "'; run 'weightpathctl help'\n";
  return kExitUsage;
}

}  // namespace weightpath::ctl
