// The device's cache of builds. A build is one file (a GGUF model, an NPU
// export) or a directory build (Artifact.files: config.json, tokenizer
// files, safetensors shards, their index). Every file is a blob stored once
// by its SHA-256, whichever builds hold it, so a shard unchanged between two
// builds is downloaded once; a directory build the engine loads is a
// directory of hard links to its blobs, assembled aside and published with
// one rename.
//
// Layout under cache_dir:
//   <sha256>                    a verified blob (a single-file build is one)
//   <sha256>.verified           its stamp (verified_stamp.h)
//   <sha256>.partial            a download in progress, resumed with Range
//   builds/<manifest sha256>/   a published directory build: its files as
//                               hard links to the blobs above
//   builds/.staging-*           a directory build being assembled
//
// Hard links, not symbolic ones: the engine (or the container it runs in,
// which often mounts only the model directory) sees regular files whatever
// it mounts, a link cannot dangle when a blob is evicted (the build's bytes
// stay until its directory goes), and st_nlink says whether any build still
// holds a blob. Both live under cache_dir, so they are on one filesystem.
//
// The disk never fills: before a download the cache computes the bytes the
// build still needs, evicts blobs no kept build holds (least recently used
// first), and refuses before downloading anything when the build still does
// not fit within `max_bytes` and `min_free_bytes`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// How long a partial download is kept for a later attempt to resume it.
inline constexpr absl::Duration kPartialDownloadLifetime = absl::Hours(24);

// A mirror moving fewer bytes per second than this for
// BuildCacheOptions::mirror_stall_timeout is skipped (a trickle is a stall).
inline constexpr uint64_t kMirrorMinRate = 1024;

struct BuildCacheOptions {
  std::string cache_dir;
  // Blobs and partial downloads together at most this many bytes; 0: no cap
  // (config cache_max_bytes).
  uint64_t max_bytes = 0;
  // Free bytes cache_dir's volume must keep after a download: the room the
  // state files written after it need (config cache_min_free_bytes).
  uint64_t min_free_bytes = uint64_t{32} << 20;
  // Files of one build downloaded at once (config parallel_downloads).
  int parallel_downloads = 4;
  // Bytes per second over all transfers together; 0: no limit (config
  // max_download_rate).
  uint64_t max_download_rate = 0;
  // A full re-hash at least this often (verified_stamp.h).
  absl::Duration reverify_after = absl::Hours(7 * 24);
  // Base URLs tried in order for each blob, as <base>/blobs/sha256/<hex>,
  // before the file's own uri (config artifact_mirrors). A mirror is
  // skipped for a blob when it answers an error or 404, sends bytes that do
  // not verify (discarded), or stalls: no kMirrorMinRate for
  // `mirror_stall_timeout`. One that is down or stalls is not asked again
  // during the same Stage.
  std::vector<std::string> mirrors;
  absl::Duration mirror_stall_timeout = absl::Seconds(10);
};

// Where a blob a Stage downloaded came from.
struct BlobSource {
  std::string sha256;
  std::string url;      // the URL that served it
  bool mirror = false;  // one of `mirrors`; false: the build's own uri
  uint64_t bytes = 0;   // received from it by this call
};

// A build in the cache, ready for the engine.
struct CachedBuild {
  // What the engine is given: the build directory, or the blob of a
  // single-file build.
  std::string path;
  bool directory = false;
  int files = 0;             // 1 for a single-file build
  int files_downloaded = 0;  // by this call
  uint64_t bytes_transferred = 0;  // received by this call
  uint64_t bytes_resumed = 0;      // already in partial files when it began
  int files_hashed = 0;            // hashed in full by this call (stamp not trusted)
  uint64_t bytes_evicted = 0;      // freed to make room by this call
  // Of bytes_transferred: what mirrors sent and what the builds' own uris
  // did (bytes a failed source sent and that were discarded count in
  // neither), and each downloaded blob's source.
  uint64_t bytes_from_mirrors = 0;
  uint64_t bytes_from_origin = 0;
  std::vector<BlobSource> sources;
};

class BuildCache {
 public:
  virtual ~BuildCache() = default;

  // The whole build in the cache, verified, and (a directory build) its
  // directory published; downloads only what no earlier build left in the
  // cache, within `time_limit` (monotonic). `keep` are the builds that must
  // survive eviction (the decision the engine runs now, the last good one);
  // `artifact` itself is never evicted while it is staged. Errors, as
  // ArtifactFetcher::Fetch's, and:
  //   INVALID_ARGUMENT  the artifact or a file of it is malformed (a path
  //                     CheckBuildFilePath refuses, files whose manifest is
  //                     not artifact.sha256 / size_bytes)
  //   DATA_LOSS         a file's bytes are not what the build lists; the
  //                     bad bytes are deleted, the other files' verified
  //                     blobs are kept
  //   RESOURCE_EXHAUSTED the build does not fit even after eviction (refused
  //                     before anything is downloaded; the message names the
  //                     bytes needed and free and the limit), or a write
  //                     failed out of space (nothing half-written is
  //                     published, the partial file is removed)
  virtual absl::StatusOr<CachedBuild> Stage(const v1::Artifact& artifact,
                                            const std::vector<const v1::Artifact*>& keep,
                                            absl::Duration time_limit) = 0;

  // The build's path when every blob is present and verifies, without any
  // network (a directory build whose directory is missing is re-linked from
  // its blobs). NOT_FOUND when a blob is absent; DATA_LOSS (and the blob is
  // deleted) when one no longer verifies.
  virtual absl::StatusOr<CachedBuild> CheckCached(const v1::Artifact& artifact) = 0;

  // The build was handed to the engine: it becomes the most recently used.
  virtual void MarkUsed(const v1::Artifact& artifact) = 0;

  // Evicts down to the limits, keeping `keep`: idle staging directories,
  // partial downloads older than kPartialDownloadLifetime (younger ones
  // only while over the limits: they are the next attempt's resume), build
  // directories no kept build is, then unreferenced blobs least recently
  // used first. Returns the bytes freed.
  virtual absl::StatusOr<uint64_t> Collect(const std::vector<const v1::Artifact*>& keep) = 0;
};

// The cache on cache_dir, downloading with libcurl (http://, https://) or
// reading file:// sources, on `clock`.
std::unique_ptr<BuildCache> MakeBuildCache(BuildCacheOptions options, Clock* clock);

// The cache options the agent's config sets (cache_dir, cache_max_bytes,
// cache_min_free_bytes, parallel_downloads, max_download_rate).
struct AgentConfig;
BuildCacheOptions BuildCacheOptionsFor(const AgentConfig& config);

// Whether a decision's artifact names anything to fetch: a uri (single file)
// or files (directory build).
bool HasArtifact(const v1::Artifact& artifact);

}  // namespace weightpath::agent
