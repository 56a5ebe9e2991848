#include "agent/cli/trust_status_command.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/config/agent_config.h"
#include "agent/flow/boot_flow.h"
#include "agent/cli/command_options.h"
#include "agent/signed/trust_status.h"
#include "trust/json.h"

namespace weightpath::agent {
namespace {

constexpr int kExitShown = 0;
constexpr int kExitUnusable = 1;

}  // namespace

std::string TrustUsage() {
  return R"(usage: weightpath-agent trust status [--config FILE] [--root DIR] [-o text|json]

Prints what this device trusts of the signed artifact metadata (TUF), from
state_dir/trust-state.json as the last boot or run pass left it (signatures
checked again), or from trust.root before the first update: per role the
version, expiry and key ids with their threshold, the delegated roles, and
notes (an expired role, a persisted copy that no longer verifies, a state
that fell back to trust.root). Uses no network.

  --config FILE  agent YAML config with a trust block
                 (default /etc/weightpath/agent.yaml)
  --root DIR     where /etc/machine-id is read when the config has no device_id
  -o FORMAT      text (default) or json

exit codes:
  0  status printed
  1  config unreadable or without a trust block, or neither the state nor
     trust.root verifies
  2  bad command line
)";
}

int RunTrustCommand(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(TrustUsage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitShown;
  }
  if (std::string(argv[1]) != "status") {
    return UsageError("trust", absl::StrCat("unknown action '", argv[1], "' (status)"),
                      TrustUsage());
  }
  const absl::StatusOr<CommandOptions> options =
      ParseCommandOptions(argc - 1, argv + 1, {"--config", "--root", "-o", "--output"});
  if (!options.ok()) return UsageError("trust status", options.status().message(), TrustUsage());
  if (options->help()) {
    std::fputs(TrustUsage().c_str(), stdout);
    return kExitShown;
  }
  const std::string format = options->Value("-o").value_or(options->ValueOr("--output", "text"));
  if (format != "text" && format != "json") {
    return UsageError("trust status", absl::StrCat("-o: '", format, "' (text or json)"),
                      TrustUsage());
  }
  const std::string config_path = options->ValueOr("--config", "/etc/weightpath/agent.yaml");
  absl::StatusOr<AgentConfig> config =
      LoadAgentConfig(config_path, options->ValueOr("--root", "/"));
  if (!config.ok()) {
    std::fprintf(stderr, "weightpath-agent trust status: config: %s\n",
                 config.status().ToString().c_str());
    return kExitUnusable;
  }
  if (!config->trust) {
    std::fprintf(stderr,
                 "weightpath-agent trust status: %s has no trust block (trust.root, "
                 "trust.metadata_url): this device installs what the server names\n",
                 config_path.c_str());
    return kExitUnusable;
  }
  absl::StatusOr<trust::Json> status = TrustStatus(*config->trust, config->state_dir, absl::Now());
  if (!status.ok()) {
    std::fprintf(stderr, "weightpath-agent trust status: %s\n", status.status().ToString().c_str());
    return kExitUnusable;
  }
  const std::string printed =
      format == "json" ? trust::PrettyJson(*status) : TrustStatusText(*status);
  std::fputs(printed.c_str(), stdout);
  return kExitShown;
}

}  // namespace weightpath::agent
