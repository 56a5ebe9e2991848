#include "agent/cli/report_command.h"

#include <cstdio>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/config/agent_config.h"
#include "common/clock.h"
#include "agent/cli/command_options.h"
#include "agent/base/local_file.h"
#include "agent/report/measurement_report.h"
#include "agent/base/random_source.h"
#include "agent/net/retry_policy.h"
#include "agent/net/weightpath_client.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {
namespace {

constexpr int kExitRecorded = 0;
constexpr int kExitNotRecorded = 1;
constexpr int kExitBadInput = 2;

}  // namespace

std::string ReportUsage() {
  return R"(usage: weightpath-agent report --file FILE [--config FILE] [--root DIR]

Sends one ReportMeasurement to weightpath-server. FILE is the JSON an engine
benchmark wrote: a ReportMeasurementRequest in the protobuf JSON mapping,
for example
  {"model": "qwen3-8b", "path": "w4a8-amx", "engine_version": "0.9.1",
   "decode_tok_s": 86.1, "prefill_tok_s": 910, "threads": 24,
   "fidelity_exact_matches": 19, "fidelity_prompts": 20}
device_id defaults to the config's; idempotency_key defaults to a SHA-256
of the device id and FILE, so resending the same file is never counted twice.
Unreachable servers are retried with the config's backoff within its budget.

  --file FILE    the measurement JSON (required)
  --config FILE  agent YAML config (default /etc/weightpath/agent.yaml)
  --root DIR     where /etc/machine-id is read when the config has no device_id

exit codes:
  0  recorded (or already recorded under the same key)
  1  the server refused it or could not be reached within the budget
  2  bad command line, unreadable/invalid FILE or config
)";
}

int RunReportCommand(int argc, char** argv) {
  const absl::StatusOr<CommandOptions> options =
      ParseCommandOptions(argc, argv, {"--file", "--config", "--root"});
  if (!options.ok()) return UsageError("report", options.status().message(), ReportUsage());
  if (options->help()) {
    std::fputs(ReportUsage().c_str(), stdout);
    return kExitRecorded;
  }
  const std::optional<std::string> file = options->Value("--file");
  if (!file.has_value()) return UsageError("report", "--file FILE is required", ReportUsage());
  absl::StatusOr<AgentConfig> config =
      LoadAgentConfig(options->ValueOr("--config", "/etc/weightpath/agent.yaml"),
                      options->ValueOr("--root", "/"));
  if (!config.ok()) {
    std::fprintf(stderr, "weightpath-agent report: config: %s\n", config.status().ToString().c_str());
    return kExitBadInput;
  }
  // An engine harness names the file; it may name /dev/zero or a FIFO by
  // mistake. Bounded and type-checked, so that is an error, not a hang or
  // an abort.
  absl::StatusOr<std::string> json = ReadLocalFile(*file, "--file");
  absl::StatusOr<v1::ReportMeasurementRequest> request =
      json.ok() ? ParseMeasurementReport(*json, *file, config->device_id)
                : absl::StatusOr<v1::ReportMeasurementRequest>(json.status());
  absl::StatusOr<std::unique_ptr<WeightPathClient>> client =
      request.ok() ? WeightPathClient::Create(config->server, config->tls)
                   : absl::StatusOr<std::unique_ptr<WeightPathClient>>(request.status());
  if (!client.ok()) {
    std::fprintf(stderr, "weightpath-agent report: %s\n", client.status().ToString().c_str());
    return kExitBadInput;
  }

  SystemClock clock;
  SeededRandomSource random(std::random_device{}());
  v1::ReportMeasurementResponse response;
  RetryTrace trace;
  const absl::Status status = CallWithRetries(
      ServerRetryOptions(*config), clock.MonotonicNow() + config->budget, clock, random,
      [&](absl::Duration timeout) -> absl::Status {
        absl::StatusOr<v1::ReportMeasurementResponse> answer =
            (*client)->ReportMeasurement(*request, timeout);
        if (!answer.ok()) return answer.status();
        response = *std::move(answer);
        return absl::OkStatus();
      },
      &trace);
  if (!status.ok()) {
    std::fprintf(stderr, "weightpath-agent report: ReportMeasurement failed after %d attempt(s): %s\n",
                 trace.attempts, status.ToString().c_str());
    return kExitNotRecorded;
  }
  std::printf("measurement_id=%s duplicate=%s regression=%s%s%s\n",
              response.measurement_id().c_str(), response.duplicate() ? "true" : "false",
              response.regression() ? "true" : "false",
              response.regression_reason().empty() ? "" : " reason=",
              response.regression_reason().c_str());
  return kExitRecorded;
}

}  // namespace weightpath::agent
