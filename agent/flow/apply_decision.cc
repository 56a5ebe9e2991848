#include "agent/flow/apply_decision.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/base/log.h"
#include "common/control_characters.h"

namespace weightpath::agent {

absl::StatusOr<DecisionRecord> StageDecision(BuildCache& builds,
                                             const v1::ResolveWeightPathResponse& response,
                                             DecisionSource source,
                                             const std::vector<const v1::Artifact*>& keep,
                                             absl::Duration time_limit, const char* who) {
  DecisionRecord record;
  record.response = response;
  record.source = source;
  const v1::Artifact& artifact = response.artifact();
  if (!HasArtifact(artifact)) return record;
  absl::StatusOr<CachedBuild> staged = builds.Stage(artifact, keep, time_limit);
  if (!staged.ok()) {
    return absl::Status(staged.status().code(),
                        absl::StrCat("artifact: ", staged.status().message()));
  }
  const std::string what = artifact.files_size() > 0
                               ? absl::StrCat("directory build of ", staged->files, " files")
                               : ControlEscaped(artifact.uri());
  if (staged->files_downloaded > 0) {
    log::Info("{}: {}: downloaded {} bytes in {} file(s) ({} from mirrors, {} from origin; "
              "resumed from {} bytes already held), {} file(s) already cached{}",
              who, what, staged->bytes_transferred, staged->files_downloaded,
              staged->bytes_from_mirrors, staged->bytes_from_origin, staged->bytes_resumed,
              staged->files - staged->files_downloaded,
              staged->bytes_evicted > 0
                  ? absl::StrCat("; evicted ", staged->bytes_evicted, " bytes to make room")
                  : std::string());
  } else {
    log::Info("{}: {} already cached and verified at {} ({} hashed)", who, what,
              ControlEscaped(staged->path), staged->files_hashed);
  }
  record.artifact_path = staged->path;
  record.downloaded = {staged->bytes_from_mirrors, staged->bytes_from_origin};
  return record;
}

std::optional<v1::Outcome> OutcomeOfStagingFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kInvalidArgument:
      return v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED;
    case absl::StatusCode::kResourceExhausted:
      return v1::OUTCOME_CACHE_FULL;
    default:
      return std::nullopt;
  }
}

void AfterHandOver(BuildCache& builds, const DecisionRecord& running,
                   const std::vector<const v1::Artifact*>& keep, const char* who) {
  if (HasArtifact(running.response.artifact()) && !running.artifact_path.empty()) {
    builds.MarkUsed(running.response.artifact());
  }
  absl::StatusOr<uint64_t> freed = builds.Collect(keep);
  if (!freed.ok()) {
    log::Warn("{}: cache not trimmed: {}", who, freed.status().ToString());
  } else if (*freed > 0) {
    log::Info("{}: evicted {} bytes from the cache", who, *freed);
  }
}

std::vector<const v1::Artifact*> ArtifactsOf(
    std::initializer_list<const DecisionRecord*> records) {
  std::vector<const v1::Artifact*> artifacts;
  for (const DecisionRecord* record : records) {
    if (record != nullptr && HasArtifact(record->response.artifact())) {
      artifacts.push_back(&record->response.artifact());
    }
  }
  return artifacts;
}

BuildCache& BuildsFor(BuildCache* injected, const AgentConfig& config, Clock* clock,
                      std::unique_ptr<BuildCache>& owned) {
  if (injected != nullptr) return *injected;
  if (owned == nullptr) owned = MakeBuildCache(BuildCacheOptionsFor(config), clock);
  return *owned;
}

}  // namespace weightpath::agent
