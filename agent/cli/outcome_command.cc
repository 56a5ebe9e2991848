#include "agent/cli/outcome_command.h"

#include <cstdio>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/flow/boot_flow.h"
#include "agent/cli/command_options.h"
#include "agent/engine/engine_readiness.h"
#include "agent/report/outcome_report.h"
#include "agent/net/weightpath_client.h"
#include "common/control_characters.h"

namespace weightpath::agent {
namespace {

absl::StatusOr<v1::Outcome> ParseOutcomeName(const std::string& text) {
  if (text == "engine_started") return v1::OUTCOME_ENGINE_STARTED;
  if (text == "engine_start_failed") return v1::OUTCOME_ENGINE_START_FAILED;
  if (text == "tasks") return v1::OUTCOME_TASKS;
  if (text == "boot_failed") return v1::OUTCOME_BOOT_FAILED;
  return absl::InvalidArgumentError(absl::StrCat(
      "--outcome: '", text,
      "' is not one of engine_started, engine_start_failed, tasks, boot_failed"));
}

absl::StatusOr<uint32_t> ParseCount(const std::string& text, absl::string_view flag) {
  uint32_t count = 0;
  if (!absl::SimpleAtoi(text, &count)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", text, "' is not a non-negative whole number"));
  }
  return count;
}

}  // namespace

absl::StatusOr<OutcomeArguments> ParseOutcomeArguments(const CommandOptions& options) {
  OutcomeArguments arguments;
  arguments.config_path = options.ValueOr("--config", "");
  arguments.root = options.ValueOr("--root", "/");
  arguments.detail = options.ValueOr("--detail", "");
  if (const std::optional<std::string> outcome = options.Value("--outcome")) {
    absl::StatusOr<v1::Outcome> parsed = ParseOutcomeName(*outcome);
    if (!parsed.ok()) return parsed.status();
    arguments.outcome = *parsed;
  }
  bool any_count = false;
  for (const auto& [flag, count] : {std::pair{"--tasks-completed", &arguments.tasks_completed},
                                    std::pair{"--tasks-undone", &arguments.tasks_undone},
                                    std::pair{"--tasks-failed", &arguments.tasks_failed}}) {
    const std::optional<std::string> text = options.Value(flag);
    if (!text.has_value()) continue;
    absl::StatusOr<uint32_t> parsed = ParseCount(*text, flag);
    if (!parsed.ok()) return parsed.status();
    *count = *parsed;
    any_count = true;
  }
  if (const std::optional<std::string> url = options.Value("--wait-ready")) {
    ReadinessWait wait;
    wait.url = *url;
    if (const std::optional<std::string> timeout = options.Value("--ready-timeout")) {
      if (!absl::ParseDuration(*timeout, &wait.timeout) || wait.timeout <= absl::ZeroDuration()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--ready-timeout: '", *timeout, "' is not a positive duration (e.g. 300s, 10m)"));
      }
    }
    arguments.wait_ready = wait;
  } else if (options.Value("--ready-timeout").has_value()) {
    return absl::InvalidArgumentError("--ready-timeout needs --wait-ready URL");
  }
  if (arguments.config_path.empty()) return absl::InvalidArgumentError("--config FILE is required");
  if (arguments.outcome == v1::OUTCOME_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        "--outcome is required (engine_started, engine_start_failed, tasks or boot_failed)");
  }
  if (any_count && arguments.outcome != v1::OUTCOME_TASKS) {
    return absl::InvalidArgumentError("--tasks-completed/--tasks-undone/--tasks-failed need --outcome tasks");
  }
  if (arguments.wait_ready.has_value() && arguments.outcome != v1::OUTCOME_ENGINE_STARTED) {
    return absl::InvalidArgumentError("--wait-ready goes with --outcome engine_started");
  }
  if (arguments.outcome == v1::OUTCOME_TASKS && !any_count) {
    return absl::InvalidArgumentError(
        "--outcome tasks needs at least one of --tasks-completed, --tasks-undone, --tasks-failed");
  }
  return arguments;
}

v1::ReportOutcomeRequest BuildOutcomeReport(const AgentConfig& config,
                                            const OutcomeArguments& arguments,
                                            const DecisionRecord& decision, absl::Time now) {
  v1::ReportOutcomeRequest request =
      arguments.outcome == v1::OUTCOME_BOOT_FAILED
          ? BootReport(config.device_id, arguments.outcome, decision, arguments.detail, now)
          : OutcomeReport(config.device_id, arguments.outcome, decision.response, arguments.detail,
                          now);
  request.set_tasks_completed(arguments.tasks_completed);
  request.set_tasks_undone(arguments.tasks_undone);
  request.set_tasks_failed(arguments.tasks_failed);
  // Lifecycle reports say what runs after them (task counts are about the
  // work, not the build): the engine's unit reports for decision_file's
  // build, and an engine that did not start runs nothing.
  if (arguments.outcome == v1::OUTCOME_ENGINE_STARTED) SetRunning(&decision, request);
  if (arguments.outcome == v1::OUTCOME_ENGINE_START_FAILED) SetRunning(nullptr, request);
  return request;
}

std::string OutcomeUsage() {
  return R"(usage: weightpath-agent outcome --config FILE --outcome engine_started|engine_start_failed|tasks|boot_failed
                              [--tasks-completed N] [--tasks-undone N] [--tasks-failed N]
                              [--detail TEXT] [--root DIR]
                              [--wait-ready URL [--ready-timeout 10m]]

Reports what happened to the build in decision_file (its path, artifact,
policy version and rollout attribution) with WeightPath.ReportOutcome. The
engine's unit calls `--outcome engine_started` from ExecStartPost once the
engine serves; an engine harness reports task counts with `--outcome tasks`.
`--outcome boot_failed` says the device could not boot the decision at all
(e.g. from the engine unit's OnFailure=), with the decision's boot_source
(server, last_good or offline; `boot` itself reports OUTCOME_BOOT_OK).

--wait-ready URL (with engine_started): first wait for the engine's
readiness endpoint (vLLM: http://127.0.0.1:8000/health) to answer 200,
polling every second for up to --ready-timeout (default 10m). When it does
not, engine_start_failed is reported instead, naming the URL and its last
answer, and the exit code is 1 (the engine's unit then fails its start).

exit codes: 0 accepted (or already recorded), 1 not sent or refused, 2 bad command line
)";
}

int RunOutcomeCommand(int argc, char** argv) {
  const absl::StatusOr<CommandOptions> options =
      ParseCommandOptions(argc, argv,
                          {"--config", "--root", "--outcome", "--tasks-completed", "--tasks-undone",
                           "--tasks-failed", "--detail", "--wait-ready", "--ready-timeout"});
  if (!options.ok()) return UsageError("outcome", options.status().message(), OutcomeUsage());
  if (options->help()) {
    std::fputs(OutcomeUsage().c_str(), stdout);
    return 0;
  }
  absl::StatusOr<OutcomeArguments> arguments = ParseOutcomeArguments(*options);
  if (!arguments.ok()) return UsageError("outcome", arguments.status().message(), OutcomeUsage());
  absl::StatusOr<AgentConfig> config = LoadAgentConfig(arguments->config_path, arguments->root);
  if (!config.ok()) {
    std::fprintf(stderr, "weightpath-agent outcome: config: %s\n",
                 std::string(config.status().message()).c_str());
    return kExitNothingUsable;
  }
  absl::StatusOr<DecisionRecord> decision = ReadDecisionFile(config->decision_file);
  if (decision.status().code() == absl::StatusCode::kNotFound) {
    std::fprintf(stderr, "weightpath-agent outcome: decision_file %s is unreadable: run boot first\n",
                 config->decision_file.c_str());
    return kExitNothingUsable;
  }
  if (!decision.ok()) {
    std::fprintf(stderr, "weightpath-agent outcome: %s\n",
                 std::string(decision.status().message()).c_str());
    return kExitNothingUsable;
  }
  absl::StatusOr<std::unique_ptr<WeightPathClient>> client =
      WeightPathClient::Create(config->server, config->tls);
  if (!client.ok()) {
    std::fprintf(stderr, "weightpath-agent outcome: %s\n",
                 std::string(client.status().message()).c_str());
    return kExitNothingUsable;
  }
  bool engine_not_ready = false;
  if (arguments->wait_ready.has_value()) {
    const absl::Status ready = WaitForEngineReady(*arguments->wait_ready, SystemClockInstance());
    if (!ready.ok()) {
      // The engine's answer is quoted in it: escaped, as in every log line.
      std::fprintf(stderr, "weightpath-agent outcome: %s\n", ControlEscaped(ready.message()).c_str());
      if (ready.code() == absl::StatusCode::kInvalidArgument) return kExitNothingUsable;
      arguments->outcome = v1::OUTCOME_ENGINE_START_FAILED;
      arguments->detail = std::string(ready.message());
      engine_not_ready = true;
    }
  }
  // observed_at is a timestamp for the server (wall time); the call's own
  // limit is a timeout, immune to the date being stepped meanwhile.
  const v1::ReportOutcomeRequest request =
      BuildOutcomeReport(*config, *arguments, *decision, absl::Now());
  absl::StatusOr<v1::ReportOutcomeResponse> response =
      (*client)->ReportOutcome(request, config->call_timeout);
  if (!response.ok()) {
    std::fprintf(stderr, "weightpath-agent outcome: %s\n",
                 std::string(response.status().message()).c_str());
    return kExitNothingUsable;
  }
  std::printf("reported %s for path=%s rollout=%s%s\n", v1::Outcome_Name(request.outcome()).c_str(),
              request.path().c_str(),
              request.rollout_id().empty() ? "none" : request.rollout_id().c_str(),
              response->duplicate() ? " (already recorded)" : "");
  return engine_not_ready ? kExitNothingUsable : 0;
}

}  // namespace weightpath::agent
