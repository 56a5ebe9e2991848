#include "agent/boot_command.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/agent_config.h"
#include "agent/boot_flow.h"
#include "agent/clock.h"
#include "agent/probe/filesystem.h"
#include "agent/probe/probe.h"
#include "agent/random_source.h"
#include "agent/resolve_client.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

#ifndef WEIGHTPATH_AGENT_VERSION
#define WEIGHTPATH_AGENT_VERSION "unknown"
#endif

namespace weightpath::agent {
namespace {

struct BootArguments {
  std::string config_path;
  std::string root = "/";
  bool help = false;
};

// Takes "--name VALUE" or "--name=VALUE"; advances `index` past the value.
std::optional<std::string> OptionValue(int argc, char** argv, int& index, const char* name) {
  const std::string argument = argv[index];
  const std::string prefix = absl::StrCat(name, "=");
  if (absl::StartsWith(argument, prefix)) return argument.substr(prefix.size());
  if (argument == name && index + 1 < argc) return std::string(argv[++index]);
  return std::nullopt;
}

std::optional<BootArguments> ParseArguments(int argc, char** argv) {
  BootArguments arguments;
  for (int index = 1; index < argc; ++index) {
    const std::string argument = argv[index];
    if (argument == "--help" || argument == "-h") {
      arguments.help = true;
    } else if (auto config = OptionValue(argc, argv, index, "--config")) {
      arguments.config_path = *config;
    } else if (auto root = OptionValue(argc, argv, index, "--root")) {
      arguments.root = *root;
    } else {
      std::fprintf(stderr, "weightpath-agent boot: unknown or incomplete argument '%s'\n%s",
                   argument.c_str(), BootUsage().c_str());
      return std::nullopt;
    }
  }
  if (!arguments.help && arguments.config_path.empty()) {
    std::fprintf(stderr, "weightpath-agent boot: --config FILE is required\n%s",
                 BootUsage().c_str());
    return std::nullopt;
  }
  return arguments;
}

// journald stamps each line itself; stderr keeps stdout free for tools.
void ConfigureLogging() {
  auto logger = spdlog::stderr_logger_mt("weightpath-agent");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
}

std::string Describe(const DecisionRecord& record) {
  return absl::StrCat("path=", record.response.weight_path().name(),
                      " model=", record.response.model(),
                      " artifact=", record.artifact_path.empty() ? "none" : record.artifact_path);
}

}  // namespace

std::string BootUsage() {
  return R"(usage: weightpath-agent boot --config FILE [--root DIR]

Resolves this device's weight path with weightpath-server, downloads and
verifies the artifact into cache_dir, and writes decision_file (JSON) and
env_file (shell-sourceable, WEIGHTPATH_*) for the engine's unit. When the
server cannot be used within the config's budget, it falls back to the last
good decision in state_dir (if its artifact still verifies), else to the
embedded default policy evaluated on this device.

  --config FILE  agent YAML config (see examples/agent.yaml)
  --root DIR     filesystem root for the probe and /etc/machine-id (default /)

WEIGHTPATH_HW_PROFILE=FILE replaces the hardware probe with a profile JSON.

exit codes:
  0  decision from the server, artifact verified
  3  the server could not be used; the last good decision was handed over
  4  the server could not be used and no last good decision verified; the
     default policy decided on the device (offline)
  1  nothing usable (no decision could be made or written), or the config is
     unreadable or invalid
  2  bad command line
)";
}

int RunBootCommand(int argc, char** argv) {
  const std::optional<BootArguments> arguments = ParseArguments(argc, argv);
  if (!arguments.has_value()) return kExitUsage;
  if (arguments->help) {
    std::fputs(BootUsage().c_str(), stdout);
    return kExitServerDecision;
  }
  ConfigureLogging();
  absl::StatusOr<AgentConfig> config = LoadAgentConfig(arguments->config_path, arguments->root);
  if (!config.ok()) {
    spdlog::error("boot: config: {} (exit {})", config.status().ToString(), kExitNothingUsable);
    return kExitNothingUsable;
  }

  SystemClock clock;
  SeededRandomSource random(std::random_device{}());
  const std::unique_ptr<probe::Filesystem> filesystem = probe::MakeRootedFilesystem(arguments->root);
  // An unusable TLS file is a reason to fall back, not to leave the device
  // without a decision, so the error surfaces as a failed resolve.
  absl::StatusOr<std::unique_ptr<ResolveClient>> client =
      ResolveClient::Create(config->server, config->tls);
  BootDependencies dependencies;
  dependencies.clock = &clock;
  dependencies.random = &random;
  dependencies.agent_version = WEIGHTPATH_AGENT_VERSION;
  dependencies.probe = [&filesystem]() {
    return probe::ProbeHardware(probe::LiveProbeEnvironment(*filesystem));
  };
  dependencies.resolve = [&client](const v1::ResolveWeightPathRequest& request,
                                   absl::Time deadline)
      -> absl::StatusOr<v1::ResolveWeightPathResponse> {
    if (!client.ok()) return client.status();
    return (*client)->Resolve(request, deadline);
  };

  absl::StatusOr<BootOutcome> outcome = RunBootFlow(*config, dependencies);
  if (!outcome.ok()) {
    spdlog::error("boot: nothing usable: {} (exit {})", outcome.status().ToString(),
                  kExitNothingUsable);
    return kExitNothingUsable;
  }
  const DecisionRecord& record = outcome->record;
  const int exit_code = ExitCodeFor(record.source);
  switch (record.source) {
    case DecisionSource::kServer:
      spdlog::info("boot: decision from the server: {} (exit {})", Describe(record), exit_code);
      break;
    case DecisionSource::kLastGood:
      spdlog::warn("boot: using the last good decision: {} (exit {})", Describe(record),
                   exit_code);
      break;
    case DecisionSource::kOffline:
      spdlog::warn("boot: offline decision from the default policy: {} (exit {})",
                   Describe(record), exit_code);
      break;
  }
  return exit_code;
}

}  // namespace weightpath::agent
