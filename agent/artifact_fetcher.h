// Brings a weight artifact into the local cache, verified, or not at all.
//
// The cache is content-addressed: cache_dir/<sha256> exists only after its
// size and digest matched. Downloads land in cache_dir/<sha256>.partial,
// which survives an interruption so the next attempt resumes from it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

struct FetchResult {
  std::string path;                // cache_dir/<sha256>
  bool downloaded = false;         // false: the cached copy verified
  uint64_t resumed_from = 0;       // bytes already in the partial file
  uint64_t bytes_transferred = 0;  // bytes received by this call
};

class ArtifactFetcher {
 public:
  explicit ArtifactFetcher(std::string cache_dir);

  // The verified artifact, downloaded (http://, https://, file://) only when
  // the cache does not already hold it. Errors:
  //   INVALID_ARGUMENT  artifact.uri / artifact.sha256 / artifact.size_bytes malformed
  //   DEADLINE_EXCEEDED `time_limit` ran out (the partial file is kept)
  //   UNAVAILABLE       the transfer broke off (the partial file is kept)
  //   NOT_FOUND         the source does not have it (HTTP 404, missing file)
  //   DATA_LOSS         the bytes are not the artifact: wrong size or digest;
  //                     nothing is installed and the bad bytes are deleted
  absl::StatusOr<FetchResult> Fetch(const v1::Artifact& artifact, absl::Duration time_limit);

  // The cached artifact's path if it is present and verifies, without any
  // network. NOT_FOUND when absent; DATA_LOSS (and the copy is deleted) when
  // it no longer matches its size or digest.
  absl::StatusOr<std::string> VerifyCached(const v1::Artifact& artifact);

  std::string CachedPath(const std::string& sha256) const;

 private:
  std::string cache_dir_;
};

// INVALID_ARGUMENT naming the field when an artifact entry is unusable.
absl::Status ValidateArtifact(const v1::Artifact& artifact);

}  // namespace weightpath::agent
