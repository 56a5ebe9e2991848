#include "agent/cli/run_command.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "agent/config/agent_config.h"
#include "agent/fetch/build_cache.h"
#include "agent/flow/boot_flow.h"
#include "agent/cli/command_options.h"
#include "agent/decision/decision_record.h"
#include "agent/cli/live_device.h"
#include "agent/base/log.h"
#include "agent/report/pending_reports.h"
#include "agent/flow/run_loop.h"
#include "agent/engine/run_shell.h"
#include "agent/signed/trust_client.h"
#include "agent/net/weightpath_client.h"

namespace weightpath::agent {
namespace {

std::optional<DecisionRecord> ReadCurrentDecision(const std::string& decision_file) {
  absl::StatusOr<DecisionRecord> record = ReadDecisionFile(decision_file);
  if (record.status().code() == absl::StatusCode::kNotFound) return std::nullopt;
  if (!record.ok()) {
    log::Warn("run: ignoring {}: {}", decision_file, record.status().ToString());
    return std::nullopt;
  }
  return *std::move(record);
}

}  // namespace

std::string RunUsage() {
  return R"(usage: weightpath-agent run --config FILE [--root DIR] [--once]

Keeps this device on the server's decision after boot: resolves again at the
interval the server suggests (resolve_interval_seconds, +-20% jitter), and
when the decision changes fetches and verifies the new artifact, swaps
decision_file and env_file atomically, runs apply_command (e.g. "systemctl
restart vllm-engine") and then engine_check_command if configured. Success is
reported as OUTCOME_ENGINE_STARTED with the decision's rollout; a failure
puts the previous decision back (files and apply_command) and reports
OUTCOME_ENGINE_START_FAILED then OUTCOME_ROLLED_BACK. Reports boot could
not send (state_dir/pending_reports.jsonl) go out with the first pass.

  --config FILE  agent YAML config (apply_command, engine_check_command,
                 resolve_interval on top of the boot keys)
  --root DIR     filesystem root for the probe and /etc/machine-id (default /)
  --once         one pass, then exit (0: nothing failed, 1: it did)

WEIGHTPATH_HW_PROFILE=FILE replaces the hardware probe with a profile JSON.
)";
}

int RunRunCommand(int argc, char** argv) {
  const absl::StatusOr<CommandOptions> options =
      ParseCommandOptions(argc, argv, {"--config", "--root"}, {"--once"});
  if (!options.ok()) return UsageError("run", options.status().message(), RunUsage());
  if (options->help()) {
    std::fputs(RunUsage().c_str(), stdout);
    return 0;
  }
  const std::optional<std::string> config_path = options->Value("--config");
  if (!config_path.has_value()) return UsageError("run", "--config FILE is required", RunUsage());
  const std::string root = options->ValueOr("--root", "/");

  absl::StatusOr<AgentConfig> config = LoadAgentConfig(*config_path, root);
  if (!config.ok()) {
    log::Error("run: config: {}", config.status().ToString());
    return kExitNothingUsable;
  }
  absl::StatusOr<std::unique_ptr<WeightPathClient>> client =
      WeightPathClient::Create(config->server, config->tls);
  if (!client.ok()) {
    log::Error("run: {}", client.status().ToString());
    return kExitNothingUsable;
  }

  LiveDevice device(root, config->state_dir);
  RunDependencies dependencies;
  device.Bind(dependencies);
  const std::unique_ptr<BuildCache> builds =
      MakeBuildCache(BuildCacheOptionsFor(*config), dependencies.clock);
  dependencies.builds = builds.get();
  dependencies.resolve = [&client](const v1::ResolveWeightPathRequest& request,
                                   absl::Duration timeout) {
    return (*client)->Resolve(request, timeout);
  };
  dependencies.report = [&client](const v1::ReportOutcomeRequest& request,
                                  absl::Duration timeout) -> absl::Status {
    return (*client)->ReportOutcome(request, timeout).status();
  };
  dependencies.run_command = RunShellCommand;
  const std::unique_ptr<TrustClient> trust = MakeTrustClient(*config, dependencies.clock);
  dependencies.trust = trust.get();

  RunLoop loop(*config, dependencies, ReadCurrentDecision(config->decision_file));
  // The boot's report, when boot could not send it, goes out with the
  // first pass; the file keeps it until the server has taken it.
  loop.QueueReports(LoadPendingReports(config->state_dir));
  if (options->Has("--once")) {
    const PassResult result = loop.RunOnce();
    const bool failed = result == PassResult::kRolledBack || result == PassResult::kFetchFailed ||
                        result == PassResult::kResolveFailed ||
                        result == PassResult::kRefusedDecision || !loop.unsent_reports().empty();
    return failed ? kExitNothingUsable : 0;
  }
  loop.Run([] { return true; });
  return 0;
}

}  // namespace weightpath::agent
