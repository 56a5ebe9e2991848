#include "agent/run_command.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/agent_config.h"
#include "agent/boot_flow.h"
#include "agent/clock.h"
#include "agent/decision_record.h"
#include "agent/probe/filesystem.h"
#include "agent/probe/probe.h"
#include "agent/random_source.h"
#include "agent/resolve_client.h"
#include "agent/run_loop.h"
#include "agent/run_report_client.h"
#include "agent/run_shell.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

#ifndef WEIGHTPATH_AGENT_VERSION
#define WEIGHTPATH_AGENT_VERSION "unknown"
#endif

namespace weightpath::agent {
namespace {

struct RunArguments {
  std::string config_path;
  std::string root = "/";
  bool once = false;
  bool help = false;
};

std::optional<RunArguments> ParseRunArguments(int argc, char** argv) {
  RunArguments arguments;
  for (int index = 1; index < argc; ++index) {
    const std::string argument = argv[index];
    auto value = [&](const char* name) -> std::optional<std::string> {
      const std::string prefix = absl::StrCat(name, "=");
      if (absl::StartsWith(argument, prefix)) return argument.substr(prefix.size());
      if (argument == name && index + 1 < argc) return std::string(argv[++index]);
      return std::nullopt;
    };
    if (argument == "--help" || argument == "-h") {
      arguments.help = true;
    } else if (argument == "--once") {
      arguments.once = true;
    } else if (auto config = value("--config")) {
      arguments.config_path = *config;
    } else if (auto root = value("--root")) {
      arguments.root = *root;
    } else {
      std::fprintf(stderr, "weightpath-agent run: unknown or incomplete argument '%s'\n%s",
                   argument.c_str(), RunUsage().c_str());
      return std::nullopt;
    }
  }
  if (!arguments.help && arguments.config_path.empty()) {
    std::fprintf(stderr, "weightpath-agent run: --config FILE is required\n%s", RunUsage().c_str());
    return std::nullopt;
  }
  return arguments;
}

std::optional<DecisionRecord> ReadCurrentDecision(const std::string& decision_file) {
  std::ifstream in(decision_file);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<DecisionRecord> record = DecisionFromJson(text.str(), decision_file);
  if (!record.ok()) {
    spdlog::warn("run: ignoring {}: {}", decision_file, record.status().ToString());
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
OUTCOME_ENGINE_START_FAILED then OUTCOME_ROLLED_BACK.

  --config FILE  agent YAML config (apply_command, engine_check_command,
                 resolve_interval on top of the boot keys)
  --root DIR     filesystem root for the probe and /etc/machine-id (default /)
  --once         one pass, then exit (0: nothing failed, 1: it did)

WEIGHTPATH_HW_PROFILE=FILE replaces the hardware probe with a profile JSON.
)";
}

int RunRunCommand(int argc, char** argv) {
  const std::optional<RunArguments> arguments = ParseRunArguments(argc, argv);
  if (!arguments.has_value()) return kExitUsage;
  if (arguments->help) {
    std::fputs(RunUsage().c_str(), stdout);
    return 0;
  }
  auto logger = spdlog::stderr_logger_mt("weightpath-agent");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);

  absl::StatusOr<AgentConfig> config = LoadAgentConfig(arguments->config_path, arguments->root);
  if (!config.ok()) {
    spdlog::error("run: config: {}", config.status().ToString());
    return kExitNothingUsable;
  }
  absl::StatusOr<std::unique_ptr<ResolveClient>> resolver =
      ResolveClient::Create(config->server, config->tls);
  if (!resolver.ok()) {
    spdlog::error("run: {}", resolver.status().ToString());
    return kExitNothingUsable;
  }
  absl::StatusOr<std::unique_ptr<ReportClient>> reporter =
      ReportClient::Create(config->server, config->tls);
  if (!reporter.ok()) {
    spdlog::error("run: {}", reporter.status().ToString());
    return kExitNothingUsable;
  }

  SystemClock clock;
  SeededRandomSource random(std::random_device{}());
  const std::unique_ptr<probe::Filesystem> filesystem = probe::MakeRootedFilesystem(arguments->root);
  RunDependencies dependencies;
  dependencies.clock = &clock;
  dependencies.random = &random;
  dependencies.agent_version = WEIGHTPATH_AGENT_VERSION;
  dependencies.probe = [&filesystem]() {
    return probe::ProbeHardware(probe::LiveProbeEnvironment(*filesystem));
  };
  dependencies.resolve = [&resolver](const v1::ResolveWeightPathRequest& request,
                                     absl::Time deadline) {
    return (*resolver)->Resolve(request, deadline);
  };
  dependencies.report = [&reporter](const v1::ReportOutcomeRequest& request,
                                    absl::Time deadline) -> absl::Status {
    return (*reporter)->Report(request, deadline).status();
  };
  dependencies.run_command = RunShellCommand;

  RunLoop loop(*config, dependencies, ReadCurrentDecision(config->decision_file));
  if (arguments->once) {
    const PassResult result = loop.RunOnce();
    const bool failed = result == PassResult::kRolledBack || result == PassResult::kFetchFailed ||
                        result == PassResult::kResolveFailed || !loop.unsent_reports().empty();
    return failed ? kExitNothingUsable : 0;
  }
  loop.Run([] { return true; });
  return 0;
}

}  // namespace weightpath::agent
