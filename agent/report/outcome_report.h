// What the agent sends WeightPath.ReportOutcome: what happened to the build
// the device was told to run. The call itself goes through WeightPathClient
// (weightpath_client.h).
#pragma once

#include <string>

#include "absl/time/time.h"
#include "agent/decision/decision_record.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// The report of `outcome` about the build `about` names (path, artifact,
// policy version, rollout attribution), observed at `observed_at` (wall
// time: a timestamp the server stores, not an interval) and keyed
// with OutcomeIdempotencyKey. `detail` is cut to the server's 1024 bytes
// (common/report_limits.h) at a UTF-8 character boundary. Task counts are the caller's to add: they are
// not part of the key.
v1::ReportOutcomeRequest OutcomeReport(const std::string& device_id, v1::Outcome outcome,
                                       const v1::ResolveWeightPathResponse& about,
                                       const std::string& detail, absl::Time observed_at);

// Where a boot's decision came from, as ReportOutcomeRequest.boot_source says it.
v1::BootSource BootSourceOf(DecisionSource source);

// OutcomeReport of OUTCOME_BOOT_OK or OUTCOME_BOOT_FAILED about the decision
// `booted` that was handed to the engine, with its boot_source; running is
// `booted` after OUTCOME_BOOT_OK, nothing after OUTCOME_BOOT_FAILED.
v1::ReportOutcomeRequest BootReport(const std::string& device_id, v1::Outcome outcome,
                                    const DecisionRecord& booted, const std::string& detail,
                                    absl::Time observed_at);

// The bytes `staged` downloaded by source (ReportOutcomeRequest's
// downloaded_from_mirrors_bytes / downloaded_from_origin_bytes), on the one
// report that follows the download: the server counts what site caches saved.
void AddDownloadedBytes(const DecisionRecord& staged, v1::ReportOutcomeRequest& request);

// ReportOutcomeRequest.running: what the engine runs once the reported
// event is over. `running` null: nothing runs (nothing_running).
void SetRunning(const DecisionRecord* running, v1::ReportOutcomeRequest& request);

// A key that names the report itself (device, rollout, outcome, instant), so
// resending the same report after a lost reply is deduplicated by the server.
std::string OutcomeIdempotencyKey(const v1::ReportOutcomeRequest& request);

}  // namespace weightpath::agent
