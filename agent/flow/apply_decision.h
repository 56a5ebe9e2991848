// The step boot and run share once a decision is in hand: its build brought
// into the cache (downloaded only where no earlier build left the bytes,
// verified file by file, a directory build published whole) and recorded as
// what the engine is to be given; and, once the engine has it, the cache
// told so and trimmed to its limits.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/config/agent_config.h"
#include "agent/decision/decision_record.h"
#include "agent/fetch/build_cache.h"
#include "common/clock.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// The decision `response` with its build staged: `record.artifact_path` is
// the build directory (a directory build), the file (a single-file build),
// or empty when the decision names no artifact. `keep` are the builds that
// must survive the eviction a download may need (the one the engine runs,
// the last good one). `who` ("boot", "run") starts the log lines. The error
// is the cache's (BuildCache::Stage), prefixed "artifact: ".
absl::StatusOr<DecisionRecord> StageDecision(BuildCache& builds,
                                             const v1::ResolveWeightPathResponse& response,
                                             DecisionSource source,
                                             const std::vector<const v1::Artifact*>& keep,
                                             absl::Duration time_limit, const char* who);

// What a failure of StageDecision says about the build, as the outcome the
// server is told: the bytes are not the build, or the entry is malformed
// (ARTIFACT_VERIFICATION_FAILED: a verdict on the build, tried again only on
// the server's failed-build schedule, run_loop.h); the build does not fit the device's cache
// (CACHE_FULL: tried again later, since room may come). Nothing for a
// transfer that broke off or ran out of time: the next attempt resumes.
std::optional<v1::Outcome> OutcomeOfStagingFailure(const absl::Status& status);

// After a hand-over: the running build becomes the cache's most recently
// used, and the cache is trimmed to its limits keeping `keep` (the build now
// running and the last good one). Eviction failing costs only room, so it is
// logged, not returned.
void AfterHandOver(BuildCache& builds, const DecisionRecord& running,
                   const std::vector<const v1::Artifact*>& keep, const char* who);

// The artifacts a decision list names, for `keep` (records without one are
// skipped).
std::vector<const v1::Artifact*> ArtifactsOf(
    std::initializer_list<const DecisionRecord*> records);

// The cache BootDependencies::builds names, or one made on config.cache_dir
// with `clock` and kept in `owned`.
BuildCache& BuildsFor(BuildCache* injected, const AgentConfig& config, Clock* clock,
                      std::unique_ptr<BuildCache>& owned);

}  // namespace weightpath::agent
