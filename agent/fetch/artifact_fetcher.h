// Brings a weight artifact into the local cache, verified, or not at all.
//
// The cache is content-addressed: cache_dir/<sha256> exists only after its
// size and digest matched. Downloads land in cache_dir/<sha256>.partial,
// which survives an interruption so the next attempt resumes from it.
//
// A verified artifact gets a stamp beside it (cache_dir/<sha256>.verified,
// see verified_stamp.h). A later check trusts a stamp whose recorded file
// identity still matches and that is younger than `reverify_after`;
// anything else (no stamp, a garbled one, any change of size, mtime, ctime,
// inode or device, an old stamp, a clock before the stamp) hashes the whole
// file again and, if it still matches, rewrites the stamp.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "agent/fetch/transfer_rate.h"
#include "agent/fetch/verified_stamp.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

struct FetchResult {
  std::string path;                // cache_dir/<sha256>
  bool downloaded = false;         // false: the cached copy verified
  uint64_t resumed_from = 0;       // bytes already in the partial file
  uint64_t bytes_transferred = 0;  // bytes received by this call
  bool hashed = false;             // the whole file was hashed by this call
};

// How one source is tried. The catalog's own URI is the source of last
// resort: its defaults (no stall limit, a Range refusal starts the file
// over) keep trying while the time limit lasts. A mirror is one source of
// several: it is given up on quickly and must not spoil the partial file
// for the next one.
struct FetchOptions {
  // Abort a transfer that moves fewer than `stall_min_rate` bytes per
  // second for this long (whole seconds, at least 1; libcurl's low-speed
  // check), and a connect that takes longer. Zero: only the time limit.
  absl::Duration stall_timeout = absl::ZeroDuration();
  uint64_t stall_min_rate = 1;
  // On any failure the bytes this call appended are cut off again (the
  // partial file keeps what it held before), and a source that refuses to
  // resume is a failure rather than a reason to start the file over.
  bool untrusted_source = false;
};

struct CachedArtifact {
  std::string path;
  bool hashed = false;  // false: its verified stamp was trusted
};

// Bit rot below the filesystem leaves the stamp matching; a full hash at
// least this often bounds how long it can go unnoticed.
inline constexpr absl::Duration kDefaultReverifyAfter = absl::Hours(7 * 24);

class ArtifactFetcher {
 public:
  // The system clock, stamps trusted for kDefaultReverifyAfter.
  explicit ArtifactFetcher(std::string cache_dir);
  // `clock`: its monotonic reading bounds downloads; its wall reading dates
  // stamps and judges their age (a stamp dated after "now", as after the
  // wall clock went back, is treated as expired). `reverify_after` must be
  // positive (zero or less: every check hashes the whole file).
  ArtifactFetcher(std::string cache_dir, Clock* clock, absl::Duration reverify_after);

  // The verified artifact, downloaded (http://, https://, file://) only when
  // the cache does not already hold it, all within `time_limit` from the
  // call (monotonic time). A file:// source must be a regular file. Errors:
  //   INVALID_ARGUMENT  artifact.uri / artifact.sha256 / artifact.size_bytes
  //                     malformed, or a file:// source that is not a regular
  //                     file (a FIFO, a device, a directory)
  //   DEADLINE_EXCEEDED `time_limit` ran out (the partial file is kept)
  //   UNAVAILABLE       the transfer broke off (the partial file is kept)
  //   NOT_FOUND         the source does not have it (HTTP 404, missing file)
  //   DATA_LOSS         the bytes are not the artifact: wrong size or digest;
  //                     nothing is installed and the bad bytes are deleted
  //   FAILED_PRECONDITION a download is needed but libcurl.so.4 cannot be
  //                     loaded (see curl_library.h)
  //   RESOURCE_EXHAUSTED the volume cannot take the artifact: refused before
  //                     the download when it would leave less than the
  //                     reserve free, or a write failed with ENOSPC (also a
  //                     quota, or EFBIG at the file size limit); the error
  //                     names it, the path and the free bytes, and the
  //                     partial file is removed
  absl::StatusOr<FetchResult> Fetch(const v1::Artifact& artifact, absl::Duration time_limit);
  absl::StatusOr<FetchResult> Fetch(const v1::Artifact& artifact, absl::Duration time_limit,
                                    const FetchOptions& options);

  // The cached artifact's path if it is present and verifies, without any
  // network. NOT_FOUND when absent; DATA_LOSS (and the copy is deleted) when
  // it no longer matches its size or digest.
  absl::StatusOr<std::string> VerifyCached(const v1::Artifact& artifact);

  // VerifyCached, also saying whether the file was hashed or its stamp trusted.
  absl::StatusOr<CachedArtifact> CheckCached(const v1::Artifact& artifact);

  std::string CachedPath(const std::string& sha256) const;

  // Bytes a download must leave free on cache_dir's volume (0 by default).
  // The state files (pending reports, the last good decision, the trust
  // state) are written after the download, often on the same volume; an
  // artifact that fills it would leave the device unable to record or
  // report why it is stuck.
  void set_free_space_reserve(uint64_t bytes) { free_space_reserve_ = bytes; }

  // One cap shared by every transfer that uses it (transfer_rate.h); null,
  // the default: none. Not owned.
  void set_transfer_rate(TransferRate* rate) { rate_ = rate; }

 private:
  // RESOURCE_EXHAUSTED, naming ENOSPC, the free and the needed bytes, when
  // the rest of the artifact (from `offset`) would leave less than the
  // reserve free. A partial file is removed when the volume is already
  // inside the reserve.
  absl::Status CheckRoomFor(const v1::Artifact& artifact, const std::string& partial_path,
                            uint64_t offset);

  // Whether a stamp beside `path` vouches for `sha256` at `identity`.
  bool StampVouches(const std::string& path, const std::string& sha256,
                    const FileIdentity& identity);

  // Stamps `path` as holding `sha256` if its identity did not change while
  // it was hashed (`before_hash`). A stamp that cannot be written only costs
  // a hash at the next check, so that is logged, not returned.
  void StampIfUnchanged(const std::string& path, const std::string& sha256,
                        const FileIdentity& before_hash);

  std::string cache_dir_;
  Clock* clock_;
  absl::Duration reverify_after_;
  uint64_t free_space_reserve_ = 0;
  TransferRate* rate_ = nullptr;
};

// INVALID_ARGUMENT naming the field when an artifact entry is unusable.
// A single-file build needs uri, sha256 and size_bytes. A directory build
// (files set) has no uri; its files must pass trust::ValidateBuildFiles,
// each with a uri like a single file's, and their manifest's digest and
// length (trust::DigestBuildManifest) must be artifact.sha256 and
// size_bytes: so a check of (target_path, sha256, size_bytes) against the
// signed targets covers every file.
absl::Status ValidateArtifact(const v1::Artifact& artifact);

}  // namespace weightpath::agent
