#include "agent/cli/boot_command.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/config/agent_config.h"
#include "agent/fetch/build_cache.h"
#include "agent/flow/boot_flow.h"
#include "agent/cli/command_options.h"
#include "agent/cli/live_device.h"
#include "agent/base/log.h"
#include "agent/report/outcome_report.h"
#include "agent/report/pending_reports.h"
#include "agent/signed/trust_client.h"
#include "agent/net/curl_library.h"
#include "agent/net/weightpath_client.h"

namespace weightpath::agent {
namespace {

std::string Describe(const DecisionRecord& record) {
  return absl::StrCat("path=", record.response.weight_path().name(),
                      " model=", record.response.model(),
                      " artifact=", record.artifact_path.empty() ? "none" : record.artifact_path);
}

// The boot is reported (OUTCOME_BOOT_OK with its boot_source) after the
// reports earlier boots left waiting, within what is left of the boot's
// budget: the engine's unit waits for boot, and a server that answers its
// resolves but takes its reports slowly (its store busy) would otherwise
// hold the engine up by a call timeout per report. What is not sent in time
// waits in state_dir for the next boot or `run` pass. A boot that fell back
// has just found the server unusable, and asking it again would hold the
// engine up for nothing, so its report waits there too; it says why the
// boot fell back, so the fleet learns what keeps the device on it.
void ReportBoot(const AgentConfig& config, const BootOutcome& outcome, const ReportCall& report,
                Clock& clock) {
  std::vector<v1::ReportOutcomeRequest> reports = LoadPendingReports(config.state_dir);
  reports.insert(reports.end(), outcome.unsent_reports.begin(), outcome.unsent_reports.end());
  reports.push_back(BootReport(config.device_id, v1::OUTCOME_BOOT_OK, outcome.record,
                               outcome.fallback_reason, clock.Now()));
  const bool server_answered =
      outcome.record.source == DecisionSource::kServer || outcome.trust_refused;
  if (server_answered) {
    reports = SendReports(std::move(reports), report, config.call_timeout, clock,
                          outcome.budget_end, "boot");
  }
  if (!reports.empty()) {
    log::Info("boot: {} outcome report(s) kept in {} until the server takes them",
              std::min(reports.size(), kMaxPendingReports), PendingReportsPath(config.state_dir));
  }
  if (absl::Status saved = SavePendingReports(reports, config.state_dir); !saved.ok()) {
    log::Warn("boot: pending outcome reports not saved: {}", saved.ToString());
  }
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

The boot is reported to the server as OUTCOME_BOOT_OK with its boot_source
(server, last_good or offline). A boot that fell back keeps its report in
state_dir/pending_reports.jsonl, and the next boot or `weightpath-agent run`
sends it once the server answers.

  --config FILE  agent YAML config (see examples/agent.yaml)
  --root DIR     filesystem root for the probe and /etc/machine-id (default /)

WEIGHTPATH_HW_PROFILE=FILE replaces the hardware probe with a profile JSON.

With a `trust` block in the config, the server's artifact must also be
listed by the repository's signed (TUF) metadata, fetched from
trust.metadata_url and verified from trust.root, with the decision's length
and sha256 and this device's hardware class; otherwise the decision is
refused, reported as OUTCOME_ARTIFACT_VERIFICATION_FAILED, and the fallbacks
below apply. Metadata that is unreachable or expired blocks a new artifact
only, never the last good one (see `weightpath-agent trust status`).

exit codes:
  0  decision from the server, artifact verified
  3  the server could not be used (or its artifact was refused by the trust
     check, log line "trust: ... refused"); the last good decision was
     handed over
  4  the server could not be used and no last good decision verified; the
     default policy decided on the device (offline)
  1  nothing usable (no decision could be made or written), or the config is
     unreadable or invalid
  2  bad command line
)";
}

int RunBootCommand(int argc, char** argv) {
  const absl::StatusOr<CommandOptions> options =
      ParseCommandOptions(argc, argv, {"--config", "--root"});
  if (!options.ok()) return UsageError("boot", options.status().message(), BootUsage());
  if (options->help()) {
    std::fputs(BootUsage().c_str(), stdout);
    return kExitServerDecision;
  }
  const std::optional<std::string> config_path = options->Value("--config");
  if (!config_path.has_value()) return UsageError("boot", "--config FILE is required", BootUsage());
  const std::string root = options->ValueOr("--root", "/");
  absl::StatusOr<AgentConfig> config = LoadAgentConfig(*config_path, root);
  if (!config.ok()) {
    log::Error("boot: config: {} (exit {})", config.status().ToString(), kExitNothingUsable);
    return kExitNothingUsable;
  }

  LiveDevice device(root, config->state_dir);
  // An unusable TLS file is a reason to fall back, not to leave the device
  // without a decision, so the error surfaces as a failed resolve.
  absl::StatusOr<std::unique_ptr<WeightPathClient>> client =
      WeightPathClient::Create(config->server, config->tls);
  BootDependencies dependencies;
  device.Bind(dependencies);
  const std::unique_ptr<BuildCache> builds =
      MakeBuildCache(BuildCacheOptionsFor(*config), dependencies.clock);
  dependencies.builds = builds.get();
  const std::unique_ptr<TrustClient> trust = MakeTrustClient(*config, dependencies.clock);
  dependencies.trust = trust.get();
  // A refusal is reported over the channel the resolve used.
  dependencies.report = [&client](const v1::ReportOutcomeRequest& request,
                                  absl::Duration timeout) -> absl::Status {
    if (!client.ok()) return client.status();
    return (*client)->ReportOutcome(request, timeout).status();
  };
  dependencies.resolve = [&client](const v1::ResolveWeightPathRequest& request,
                                   absl::Duration timeout)
      -> absl::StatusOr<v1::ResolveWeightPathResponse> {
    if (!client.ok()) return client.status();
    return (*client)->Resolve(request, timeout);
  };

  absl::StatusOr<BootOutcome> outcome = RunBootFlow(*config, dependencies);
  if (!outcome.ok()) {
    log::Error("boot: nothing usable: {} (exit {})", outcome.status().ToString(),
                  kExitNothingUsable);
    return kExitNothingUsable;
  }
  const DecisionRecord& record = outcome->record;
  // A fallback because libcurl cannot be loaded is counted apart from an
  // outage: exits 3 and 4 keep the engine starting, but a device that
  // cannot download would sit on its fallback for good.
  const absl::Status curl = CurlLoadFailure();
  const bool cannot_download = record.source != DecisionSource::kServer && !curl.ok();
  const int exit_code = cannot_download ? kExitCannotDownload : ExitCodeFor(record.source);
  const char* const why =
      outcome->trust_refused ? " (the server's artifact was refused by the trust check)" : "";
  switch (record.source) {
    case DecisionSource::kServer:
      log::Info("boot: decision from the server: {} (exit {})", Describe(record), exit_code);
      break;
    case DecisionSource::kLastGood:
      log::Warn("boot: using the last good decision{}: {} (exit {})", why, Describe(record),
                   exit_code);
      break;
    case DecisionSource::kOffline:
      log::Warn("boot: offline decision from the default policy{}: {} (exit {})", why,
                   Describe(record), exit_code);
      break;
  }
  ReportBoot(*config, *outcome, dependencies.report, *dependencies.clock);
  if (cannot_download) {
    log::Error("boot: this install cannot download: {}; install libcurl4, which the "
               "weightpath-agent package depends on (exit {})",
               std::string(curl.message()), exit_code);
  }
  return exit_code;
}

}  // namespace weightpath::agent
