#include "agent/outcome_command.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/boot_flow.h"
#include "agent/run_report_client.h"

namespace weightpath::agent {
namespace {

absl::StatusOr<v1::Outcome> ParseOutcomeName(const std::string& text) {
  if (text == "engine_started") return v1::OUTCOME_ENGINE_STARTED;
  if (text == "engine_start_failed") return v1::OUTCOME_ENGINE_START_FAILED;
  if (text == "tasks") return v1::OUTCOME_TASKS;
  return absl::InvalidArgumentError(absl::StrCat(
      "--outcome: '", text, "' is not one of engine_started, engine_start_failed, tasks"));
}

absl::StatusOr<uint32_t> ParseCount(const std::string& text, absl::string_view flag) {
  uint32_t count = 0;
  if (!absl::SimpleAtoi(text, &count)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", text, "' is not a non-negative whole number"));
  }
  return count;
}

google::protobuf::Timestamp ToTimestamp(absl::Time time) {
  google::protobuf::Timestamp timestamp;
  const int64_t nanos = absl::ToUnixNanos(time);
  timestamp.set_seconds(nanos / 1'000'000'000);
  timestamp.set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
  return timestamp;
}

}  // namespace

absl::StatusOr<OutcomeArguments> ParseOutcomeArguments(int argc, char** argv) {
  OutcomeArguments arguments;
  bool any_count = false;
  for (int index = 1; index < argc; ++index) {
    const std::string argument = argv[index];
    std::string name = argument;
    std::optional<std::string> value;
    if (const size_t equals = argument.find('='); equals != std::string::npos) {
      name = argument.substr(0, equals);
      value = argument.substr(equals + 1);
    }
    const bool known = name == "--config" || name == "--root" || name == "--outcome" ||
                       name == "--tasks-completed" || name == "--tasks-undone" ||
                       name == "--tasks-failed" || name == "--detail";
    if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown argument '", argument, "'"));
    if (!value.has_value()) {
      if (index + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      value = argv[++index];
    }
    if (name == "--config") {
      arguments.config_path = *value;
    } else if (name == "--root") {
      arguments.root = *value;
    } else if (name == "--detail") {
      arguments.detail = *value;
    } else if (name == "--outcome") {
      absl::StatusOr<v1::Outcome> outcome = ParseOutcomeName(*value);
      if (!outcome.ok()) return outcome.status();
      arguments.outcome = *outcome;
    } else {
      absl::StatusOr<uint32_t> count = ParseCount(*value, name.substr(2));
      if (!count.ok()) return count.status();
      any_count = true;
      if (name == "--tasks-completed") arguments.tasks_completed = *count;
      if (name == "--tasks-undone") arguments.tasks_undone = *count;
      if (name == "--tasks-failed") arguments.tasks_failed = *count;
    }
  }
  if (arguments.config_path.empty()) return absl::InvalidArgumentError("--config FILE is required");
  if (arguments.outcome == v1::OUTCOME_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        "--outcome is required (engine_started, engine_start_failed or tasks)");
  }
  if (any_count && arguments.outcome != v1::OUTCOME_TASKS) {
    return absl::InvalidArgumentError("--tasks-completed/--tasks-undone/--tasks-failed need --outcome tasks");
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
  v1::ReportOutcomeRequest request;
  request.set_device_id(config.device_id);
  request.set_outcome(arguments.outcome);
  request.set_path(decision.response.weight_path().name());
  request.set_artifact_sha256(decision.response.artifact().sha256());
  request.set_policy_version(decision.response.policy_version());
  request.set_rollout_id(decision.response.rollout().rollout_id());
  request.set_tasks_completed(arguments.tasks_completed);
  request.set_tasks_undone(arguments.tasks_undone);
  request.set_tasks_failed(arguments.tasks_failed);
  request.set_detail(arguments.detail);
  *request.mutable_observed_at() = ToTimestamp(now);
  request.set_idempotency_key(OutcomeIdempotencyKey(request));
  return request;
}

std::string OutcomeUsage() {
  return R"(usage: weightpath-agent outcome --config FILE --outcome engine_started|engine_start_failed|tasks
                              [--tasks-completed N] [--tasks-undone N] [--tasks-failed N]
                              [--detail TEXT] [--root DIR]

Reports what happened to the build in decision_file (its path, artifact,
policy version and rollout attribution) with WeightPath.ReportOutcome. The
engine's unit calls `--outcome engine_started` from ExecStartPost once the
engine serves; an engine harness reports task counts with `--outcome tasks`.

exit codes: 0 accepted (or already recorded), 1 not sent or refused, 2 bad command line
)";
}

int RunOutcomeCommand(int argc, char** argv) {
  for (int index = 1; index < argc; ++index) {
    if (std::string(argv[index]) == "--help" || std::string(argv[index]) == "-h") {
      std::fputs(OutcomeUsage().c_str(), stdout);
      return 0;
    }
  }
  absl::StatusOr<OutcomeArguments> arguments = ParseOutcomeArguments(argc, argv);
  if (!arguments.ok()) {
    std::fprintf(stderr, "weightpath-agent outcome: %s\n%s",
                 std::string(arguments.status().message()).c_str(), OutcomeUsage().c_str());
    return kExitUsage;
  }
  absl::StatusOr<AgentConfig> config = LoadAgentConfig(arguments->config_path, arguments->root);
  if (!config.ok()) {
    std::fprintf(stderr, "weightpath-agent outcome: config: %s\n",
                 std::string(config.status().message()).c_str());
    return kExitNothingUsable;
  }
  std::ifstream in(config->decision_file);
  if (!in) {
    std::fprintf(stderr, "weightpath-agent outcome: decision_file %s is unreadable: run boot first\n",
                 config->decision_file.c_str());
    return kExitNothingUsable;
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<DecisionRecord> decision = DecisionFromJson(text.str(), config->decision_file);
  if (!decision.ok()) {
    std::fprintf(stderr, "weightpath-agent outcome: %s\n",
                 std::string(decision.status().message()).c_str());
    return kExitNothingUsable;
  }
  absl::StatusOr<std::unique_ptr<ReportClient>> client =
      ReportClient::Create(config->server, config->tls);
  if (!client.ok()) {
    std::fprintf(stderr, "weightpath-agent outcome: %s\n",
                 std::string(client.status().message()).c_str());
    return kExitNothingUsable;
  }
  const absl::Time now = absl::Now();
  const v1::ReportOutcomeRequest request = BuildOutcomeReport(*config, *arguments, *decision, now);
  absl::StatusOr<v1::ReportOutcomeResponse> response =
      (*client)->Report(request, now + config->call_timeout);
  if (!response.ok()) {
    std::fprintf(stderr, "weightpath-agent outcome: %s\n",
                 std::string(response.status().message()).c_str());
    return kExitNothingUsable;
  }
  std::printf("reported %s for path=%s rollout=%s%s\n", v1::Outcome_Name(request.outcome()).c_str(),
              request.path().c_str(),
              request.rollout_id().empty() ? "none" : request.rollout_id().c_str(),
              response->duplicate() ? " (already recorded)" : "");
  return 0;
}

}  // namespace weightpath::agent
