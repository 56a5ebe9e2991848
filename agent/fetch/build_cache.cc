#include "agent/fetch/build_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/base/log.h"
#include "agent/config/agent_config.h"
#include "agent/fetch/artifact_fetcher.h"
#include "agent/fetch/cache_directory.h"
#include "agent/fetch/sha256_file.h"
#include "agent/fetch/transfer_rate.h"
#include "agent/fetch/verified_stamp.h"
#include "agent/net/curl_library.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

namespace weightpath::agent {
namespace {

// SHA-256 of no bytes: a zero-length file of a build is made here, never
// downloaded.
constexpr char kEmptySha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// One blob a build needs: the bytes of one or more of its files.
struct Blob {
  std::string sha256;
  uint64_t size_bytes = 0;
  std::string uri;
  std::string label;  // what errors name: the file's path, or the uri
};

std::vector<Blob> BlobsOf(const v1::Artifact& artifact) {
  std::vector<Blob> blobs;
  if (artifact.files().empty()) {
    blobs.push_back({artifact.sha256(), artifact.size_bytes(), artifact.uri(), ""});
    return blobs;
  }
  std::set<std::string> seen;
  for (const v1::BuildFile& file : artifact.files()) {
    if (!seen.insert(file.sha256()).second) continue;  // the same bytes under two paths
    blobs.push_back({file.sha256(), file.size_bytes(), file.uri(),
                     absl::StrCat("artifact.files[", ControlEscaped(file.path()), "]")});
  }
  return blobs;
}

// What must survive eviction: the blobs and build directories of `keep`
// and of the build being staged.
struct Protected {
  std::set<std::string> blobs;
  std::set<std::string> builds;
};

Protected ProtectedBy(const std::vector<const v1::Artifact*>& keep, const v1::Artifact* staged) {
  Protected out;
  auto add = [&out](const v1::Artifact& artifact) {
    if (!HasArtifact(artifact)) return;
    if (artifact.files().empty()) {
      out.blobs.insert(artifact.sha256());
      return;
    }
    out.builds.insert(artifact.sha256());
    for (const v1::BuildFile& file : artifact.files()) out.blobs.insert(file.sha256());
  };
  for (const v1::Artifact* artifact : keep) {
    if (artifact != nullptr) add(*artifact);
  }
  if (staged != nullptr) add(*staged);
  return out;
}

std::string WithLabel(const Blob& blob, absl::string_view message) {
  return blob.label.empty() ? std::string(message) : absl::StrCat(blob.label, ": ", message);
}

absl::Status Labelled(const Blob& blob, const absl::Status& status) {
  return absl::Status(status.code(), WithLabel(blob, status.message()));
}

// The stamps that vouch for blobs now, so they can follow the blobs through
// the agent's own link changes (linking into a build directory, removing
// one): a new link moves the blob's ctime, which alone would make the next
// check hash every shard of every build again. Only a stamp that vouched
// for the identity just before the change is carried, with its date kept,
// so the periodic full re-hash still comes when it is due.
class StampCarrier {
 public:
  void Remember(const std::string& blob_path) {
    absl::StatusOr<VerifiedStamp> stamp = ReadStamp(StampPathFor(blob_path));
    absl::StatusOr<FileIdentity> identity = StatFileIdentity(blob_path);
    if (stamp.ok() && identity.ok() && stamp->identity == *identity) {
      stamps_.emplace_back(blob_path, *std::move(stamp));
    }
  }
  void Carry() {
    for (const auto& [path, stamp] : stamps_) {
      absl::StatusOr<FileIdentity> now = StatFileIdentity(path);
      if (!now.ok()) continue;
      FileIdentity only_ctime = stamp.identity;
      only_ctime.ctime_ns = now->ctime_ns;
      if (only_ctime != *now || now->ctime_ns == stamp.identity.ctime_ns) continue;
      VerifiedStamp moved = stamp;
      moved.identity = *now;
      if (absl::Status written = WriteStamp(StampPathFor(path), moved); !written.ok()) {
        log::Warn("build cache: cannot carry the stamp of {}: {}", path, written.ToString());
      }
    }
    stamps_.clear();
  }

 private:
  std::vector<std::pair<std::string, VerifiedStamp>> stamps_;
};

absl::Status Errno(absl::string_view what, const std::string& label) {
  const int error = errno;
  const std::string text = absl::StrCat("cannot ", what, " ", label, ": ", std::strerror(error));
  if (error == ENOSPC || error == EDQUOT) return absl::ResourceExhaustedError(text);
  return absl::InternalError(text);
}

// The mirrors' failures during one Stage, shared by its download threads:
// each mirror's first failure is logged (its URL and why), and a mirror
// that is down or stalls is not asked for the build's other blobs.
class MirrorFailures {
 public:
  explicit MirrorFailures(size_t mirrors) : failures_(mirrors), dead_(mirrors, false) {}

  bool Dead(size_t mirror) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dead_[mirror];
  }
  void Note(size_t mirror, const std::string& url, const absl::Status& status) {
    // Unreachable, refused mid-transfer or too slow: the mirror itself is
    // the trouble. A 404 or bytes that do not verify concern one blob.
    const bool down = absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
    std::lock_guard<std::mutex> lock(mutex_);
    if (failures_[mirror]++ == 0) {
      log::Warn("build cache: mirror {} skipped: {}{}", ControlEscaped(url), status.ToString(),
                down ? " (not asked again for this build)" : "");
    }
    if (down) dead_[mirror] = true;
  }
  int failures(size_t mirror) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return failures_[mirror];
  }

 private:
  mutable std::mutex mutex_;
  std::vector<int> failures_;
  std::vector<bool> dead_;
};

class LocalBuildCache : public BuildCache {
 public:
  LocalBuildCache(BuildCacheOptions options, Clock* clock)
      : options_(std::move(options)),
        clock_(clock),
        fetcher_(options_.cache_dir, clock, options_.reverify_after),
        rate_(options_.max_download_rate),
        builds_dir_(options_.cache_dir + "/builds") {
    fetcher_.set_free_space_reserve(options_.min_free_bytes);
    fetcher_.set_transfer_rate(&rate_);
  }

  absl::StatusOr<CachedBuild> Stage(const v1::Artifact& artifact,
                                    const std::vector<const v1::Artifact*>& keep,
                                    absl::Duration time_limit) override;
  absl::StatusOr<CachedBuild> CheckCached(const v1::Artifact& artifact) override;
  void MarkUsed(const v1::Artifact& artifact) override;
  absl::StatusOr<uint64_t> Collect(const std::vector<const v1::Artifact*>& keep) override;

 private:
  std::string BlobPath(const std::string& sha256) const {
    return absl::StrCat(options_.cache_dir, "/", sha256);
  }
  std::string BuildPath(const std::string& sha256) const {
    return absl::StrCat(builds_dir_, "/", sha256);
  }
  absl::Status CreateDirectories();
  // Bytes still to download for `blobs`: each missing blob's size less what
  // its partial file already holds.
  uint64_t BytesNeeded(const std::vector<Blob>& blobs) const;
  uint64_t UsedBytes(const CacheContents& contents) const {
    return contents.blob_bytes + contents.partial_bytes;
  }
  bool Fits(uint64_t used, uint64_t needed, int64_t free_bytes) const {
    if (options_.max_bytes > 0 && used + needed > options_.max_bytes) return false;
    if (free_bytes >= 0 && static_cast<uint64_t>(free_bytes) < needed + options_.min_free_bytes) {
      return false;
    }
    return true;
  }
  // Evicts (stale partial files not of `staged`, then blobs nobody in
  // `protect` holds, least recently used first) until `needed` more bytes
  // fit, or refuses. `freed` counts what went either way.
  absl::Status MakeRoom(const v1::Artifact& staged, const std::vector<Blob>& blobs,
                        uint64_t needed, const Protected& protect, uint64_t* freed);
  // Removes blob `sha256` (and its stamp) after every unprotected build
  // directory holding it; its bytes when its last link went.
  uint64_t EvictBlob(const CacheBlob& blob, const Protected& protect);
  void RemoveBuildDirectory(const std::string& sha256);
  void RemoveIdleStaging(const CacheContents& contents);
  absl::Status EnsureEmptyBlob(const Blob& blob);
  // One blob from the mirrors in order, then its own uri; `source` is set
  // when it was downloaded.
  absl::StatusOr<FetchResult> FetchBlob(const Blob& blob, MonotonicTime deadline,
                                        MirrorFailures& failures, BlobSource* source);
  // Whether builds/<sha256> holds exactly the build's files, each a link to
  // its blob.
  bool BuildDirectoryComplete(int builds_fd, const v1::Artifact& artifact) const;
  // Links the build's files into a staging directory and publishes it as
  // builds/<artifact.sha256> with one rename.
  absl::Status Publish(const v1::Artifact& artifact);

  BuildCacheOptions options_;
  Clock* clock_;
  ArtifactFetcher fetcher_;
  TransferRate rate_;
  std::string builds_dir_;
};

absl::Status LocalBuildCache::CreateDirectories() {
  if (::mkdir(options_.cache_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    // Parents too, as the fetcher always did.
    std::error_code error;
    std::filesystem::create_directories(options_.cache_dir, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat("cache_dir: cannot create ",
                                                        options_.cache_dir, ": ", error.message()));
    }
  }
  struct stat info;
  if (::lstat(builds_dir_.c_str(), &info) == 0 && !S_ISDIR(info.st_mode)) {
    // A symlink (or anything else) planted as builds/ would send the links
    // and renames elsewhere: it goes, as the link it is.
    log::Warn("build cache: {} is not a directory; removed", builds_dir_);
    ::unlink(builds_dir_.c_str());
  }
  if (::mkdir(builds_dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cache_dir: cannot create ", builds_dir_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

uint64_t LocalBuildCache::BytesNeeded(const std::vector<Blob>& blobs) const {
  uint64_t needed = 0;
  for (const Blob& blob : blobs) {
    struct stat info;
    if (::lstat(BlobPath(blob.sha256).c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        static_cast<uint64_t>(info.st_size) == blob.size_bytes) {
      continue;
    }
    uint64_t have = 0;
    if (::lstat((BlobPath(blob.sha256) + ".partial").c_str(), &info) == 0 &&
        S_ISREG(info.st_mode) && static_cast<uint64_t>(info.st_size) <= blob.size_bytes) {
      have = static_cast<uint64_t>(info.st_size);
    }
    needed += blob.size_bytes - have;
  }
  return needed;
}

void LocalBuildCache::RemoveBuildDirectory(const std::string& sha256) {
  UniqueFd builds(::open(builds_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!builds.valid()) return;
  // The blobs it links lose a link: their stamps follow.
  StampCarrier carrier;
  absl::StatusOr<CacheContents> contents = ScanCache(options_.cache_dir);
  if (contents.ok()) {
    for (const CacheBlob& blob : contents->blobs) {
      if (std::find(blob.builds.begin(), blob.builds.end(), sha256) != blob.builds.end()) {
        carrier.Remember(BlobPath(blob.sha256));
      }
    }
  }
  if (absl::Status removed = RemoveEntryAt(builds.get(), sha256, BuildPath(sha256));
      !removed.ok()) {
    log::Warn("build cache: {}", removed.ToString());
    return;
  }
  log::Info("build cache: removed build directory {}", BuildPath(sha256));
  carrier.Carry();
}

void LocalBuildCache::RemoveIdleStaging(const CacheContents& contents) {
  if (contents.staging.empty()) return;
  UniqueFd builds(::open(builds_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!builds.valid()) return;
  for (const std::string& name : contents.staging) {
    UniqueFd dir(::openat(builds.get(), name.c_str(),
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    // A staging directory being assembled is locked by its writer.
    if (dir.valid() && ::flock(dir.get(), LOCK_EX | LOCK_NB) != 0) continue;
    if (absl::Status removed = RemoveEntryAt(builds.get(), name, builds_dir_ + "/" + name);
        !removed.ok()) {
      log::Warn("build cache: {}", removed.ToString());
    }
  }
}

uint64_t LocalBuildCache::EvictBlob(const CacheBlob& blob, const Protected& protect) {
  for (const std::string& build : blob.builds) {
    if (protect.builds.count(build) == 0) RemoveBuildDirectory(build);
  }
  const std::string path = BlobPath(blob.sha256);
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return 0;
  const bool last_link = info.st_nlink <= 1;
  ::unlink(StampPathFor(path).c_str());
  if (::unlink(path.c_str()) != 0) return 0;
  log::Info("build cache: evicted blob {} ({} bytes, last used {})", path, blob.size_bytes,
            absl::FormatTime(blob.last_used));
  return last_link ? static_cast<uint64_t>(info.st_size) : 0;
}

absl::Status LocalBuildCache::MakeRoom(const v1::Artifact& staged, const std::vector<Blob>& blobs,
                                       uint64_t needed, const Protected& protect,
                                       uint64_t* freed) {
  ASSIGN_OR_RETURN(CacheContents contents, ScanCache(options_.cache_dir));
  RemoveIdleStaging(contents);
  uint64_t used = UsedBytes(contents);
  if (Fits(used, needed, FreeBytesOn(options_.cache_dir))) return absl::OkStatus();
  std::set<std::string> own;
  for (const Blob& blob : blobs) own.insert(blob.sha256);
  // Stale partial files of other blobs first, oldest first: bytes of a
  // download nobody is waiting for.
  std::vector<const CachePartial*> partials;
  for (const CachePartial& partial : contents.partials) {
    if (own.count(partial.sha256) == 0 && !partial.being_written) partials.push_back(&partial);
  }
  std::sort(partials.begin(), partials.end(), [](const CachePartial* a, const CachePartial* b) {
    return a->modified < b->modified;
  });
  for (const CachePartial* partial : partials) {
    absl::StatusOr<uint64_t> removed = RemoveIdlePartial(options_.cache_dir, partial->sha256);
    if (!removed.ok()) continue;
    *freed += *removed;
    used -= std::min(used, *removed);
    if (Fits(used, needed, FreeBytesOn(options_.cache_dir))) return absl::OkStatus();
  }
  std::vector<const CacheBlob*> candidates;
  for (const CacheBlob& blob : contents.blobs) {
    if (protect.blobs.count(blob.sha256) == 0) candidates.push_back(&blob);
  }
  std::sort(candidates.begin(), candidates.end(), [](const CacheBlob* a, const CacheBlob* b) {
    return a->last_used < b->last_used;
  });
  for (const CacheBlob* blob : candidates) {
    const uint64_t gone = EvictBlob(*blob, protect);
    *freed += gone;
    used -= std::min(used, blob->size_bytes);
    if (Fits(used, needed, FreeBytesOn(options_.cache_dir))) return absl::OkStatus();
  }
  const int64_t free_bytes = FreeBytesOn(options_.cache_dir);
  return absl::ResourceExhaustedError(absl::StrCat(
      "build ", staged.sha256(), " (", blobs.size(), staged.files().empty() ? " file" : " files",
      ") does not fit the cache: it needs ", needed, " more bytes; cache_dir ",
      options_.cache_dir, " holds ", used, " bytes of blobs and partial downloads",
      options_.max_bytes > 0 ? absl::StrCat(" (cache_max_bytes ", options_.max_bytes, ")")
                             : std::string(" (no cache_max_bytes)"),
      ", its volume has ", free_bytes >= 0 ? absl::StrCat(free_bytes) : "an unknown number of",
      " bytes free and keeps cache_min_free_bytes ", options_.min_free_bytes,
      " free; eviction freed ", *freed,
      " bytes (everything the running, last good and staged builds do not hold); nothing was "
      "downloaded"));
}

absl::Status LocalBuildCache::EnsureEmptyBlob(const Blob& blob) {
  if (blob.sha256 != kEmptySha256) {
    return absl::DataLossError(WithLabel(
        blob, absl::StrCat("size_bytes is 0 but sha256 is ", blob.sha256,
                           ", not the digest of no bytes (", kEmptySha256, ")")));
  }
  const std::string path = BlobPath(blob.sha256);
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0) {
    if (S_ISREG(info.st_mode) && info.st_size == 0) return absl::OkStatus();
    ::unlink(path.c_str());
  }
  UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!file.valid() && errno != EEXIST) return Errno("create", path);
  return absl::OkStatus();
}

absl::StatusOr<FetchResult> LocalBuildCache::FetchBlob(const Blob& blob, MonotonicTime deadline,
                                                       MirrorFailures& failures,
                                                       BlobSource* source) {
  v1::Artifact one;
  one.set_sha256(blob.sha256);
  one.set_size_bytes(blob.size_bytes);
  FetchOptions mirror_options;
  mirror_options.stall_timeout = options_.mirror_stall_timeout;
  mirror_options.untrusted_source = true;
  // Under a download rate cap each transfer's share may itself be below
  // kMirrorMinRate: then the stall is judged against a fraction of it.
  mirror_options.stall_min_rate = kMirrorMinRate;
  if (options_.max_download_rate > 0) {
    const uint64_t share = options_.max_download_rate /
                           (4 * static_cast<uint64_t>(std::max(1, options_.parallel_downloads)));
    mirror_options.stall_min_rate = std::clamp<uint64_t>(share, 1, kMirrorMinRate);
  }
  for (size_t m = 0; m < options_.mirrors.size(); ++m) {
    if (failures.Dead(m)) continue;
    const absl::Duration left = deadline - clock_->MonotonicNow();
    if (left <= absl::ZeroDuration()) break;
    one.set_uri(absl::StrCat(options_.mirrors[m], "/blobs/sha256/", blob.sha256));
    absl::StatusOr<FetchResult> fetched = fetcher_.Fetch(one, left, mirror_options);
    if (fetched.ok()) {
      if (fetched->downloaded) *source = {blob.sha256, one.uri(), true, fetched->bytes_transferred};
      return fetched;
    }
    // Out of room or a cache_dir that cannot be written is no mirror's
    // doing: another source would fail the same way.
    if (absl::IsResourceExhausted(fetched.status()) || absl::IsInternal(fetched.status()) ||
        absl::IsFailedPrecondition(fetched.status())) {
      return fetched;
    }
    failures.Note(m, options_.mirrors[m], Labelled(blob, fetched.status()));
  }
  one.set_uri(blob.uri);
  absl::StatusOr<FetchResult> fetched =
      fetcher_.Fetch(one, deadline - clock_->MonotonicNow());
  if (fetched.ok() && fetched->downloaded) {
    *source = {blob.sha256, blob.uri, false, fetched->bytes_transferred};
  }
  return fetched;
}

absl::StatusOr<CachedBuild> LocalBuildCache::Stage(const v1::Artifact& artifact,
                                                   const std::vector<const v1::Artifact*>& keep,
                                                   absl::Duration time_limit) {
  const MonotonicTime deadline = clock_->MonotonicNow() + time_limit;
  RETURN_IF_ERROR(ValidateArtifact(artifact));
  RETURN_IF_ERROR(CreateDirectories());
  const std::vector<Blob> blobs = BlobsOf(artifact);
  CachedBuild result;
  result.directory = !artifact.files().empty();
  result.files = result.directory ? artifact.files_size() : 1;

  const uint64_t needed = BytesNeeded(blobs);
  if (needed > 0) {
    RETURN_IF_ERROR(
        MakeRoom(artifact, blobs, needed, ProtectedBy(keep, &artifact), &result.bytes_evicted));
  }

  // libcurl's global set-up runs once, here, before any thread uses it:
  // curl_global_init is not thread-safe on older libcurl.
  bool any_http = false;
  for (const Blob& blob : blobs) any_http |= !absl::StartsWith(blob.uri, "file://");
  if (any_http && needed > 0) (void)LoadCurl();

  struct Fetched {
    absl::StatusOr<FetchResult> result = absl::UnknownError("not fetched");
    BlobSource source;
  };
  MirrorFailures failures(options_.mirrors.size());
  std::vector<Fetched> fetched(blobs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < blobs.size(); i = next++) {
      const Blob& blob = blobs[i];
      if (blob.size_bytes == 0) {
        absl::Status made = EnsureEmptyBlob(blob);
        if (made.ok()) {
          fetched[i].result = FetchResult{BlobPath(blob.sha256)};
        } else {
          fetched[i].result = made;
        }
        continue;
      }
      fetched[i].result = FetchBlob(blob, deadline, failures, &fetched[i].source);
    }
  };
  const size_t threads = std::min<size_t>(
      blobs.size(), static_cast<size_t>(std::clamp(options_.parallel_downloads, 1, 16)));
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (std::thread& thread : pool) thread.join();
  }
  absl::Status first_error;
  size_t failed = 0;
  for (size_t i = 0; i < blobs.size(); ++i) {
    const absl::StatusOr<FetchResult>& one = fetched[i].result;
    if (!one.ok()) {
      if (failed++ == 0) first_error = Labelled(blobs[i], one.status());
      continue;
    }
    if (one->downloaded) {
      ++result.files_downloaded;
      result.bytes_resumed += one->resumed_from;
      const BlobSource& source = fetched[i].source;
      (source.mirror ? result.bytes_from_mirrors : result.bytes_from_origin) += source.bytes;
      result.sources.push_back(source);
    }
    result.bytes_transferred += one->bytes_transferred;
    if (one->hashed) ++result.files_hashed;
  }
  if (failed > 0) {
    if (result.directory) RemoveBuildDirectory(artifact.sha256());
    if (failed == 1) return first_error;
    return absl::Status(first_error.code(),
                        absl::StrCat(first_error.message(), " (and ", failed - 1,
                                     " more of the build's files failed; the files that "
                                     "verified are kept)"));
  }
  if (!result.directory) {
    result.path = BlobPath(artifact.sha256());
    return result;
  }
  RETURN_IF_ERROR(Publish(artifact));
  result.path = BuildPath(artifact.sha256());
  return result;
}

absl::StatusOr<CachedBuild> LocalBuildCache::CheckCached(const v1::Artifact& artifact) {
  RETURN_IF_ERROR(ValidateArtifact(artifact));
  const std::vector<Blob> blobs = BlobsOf(artifact);
  CachedBuild result;
  result.directory = !artifact.files().empty();
  result.files = result.directory ? artifact.files_size() : 1;
  for (const Blob& blob : blobs) {
    if (blob.size_bytes == 0) {
      struct stat info;
      if (::lstat(BlobPath(blob.sha256).c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
        return absl::NotFoundError(WithLabel(blob, "the empty file is not cached"));
      }
      continue;
    }
    v1::Artifact one;
    one.set_uri(blob.uri);
    one.set_sha256(blob.sha256);
    one.set_size_bytes(blob.size_bytes);
    absl::StatusOr<CachedArtifact> cached = fetcher_.CheckCached(one);
    if (!cached.ok()) {
      // A damaged blob was deleted; the build directory links the same bad
      // bytes, so it goes too.
      if (result.directory && absl::IsDataLoss(cached.status())) {
        RemoveBuildDirectory(artifact.sha256());
      }
      return Labelled(blob, cached.status());
    }
    if (cached->hashed) ++result.files_hashed;
  }
  if (!result.directory) {
    result.path = BlobPath(artifact.sha256());
    return result;
  }
  RETURN_IF_ERROR(CreateDirectories());
  RETURN_IF_ERROR(Publish(artifact));
  result.path = BuildPath(artifact.sha256());
  return result;
}

bool LocalBuildCache::BuildDirectoryComplete(int builds_fd, const v1::Artifact& artifact) const {
  UniqueFd dir(::openat(builds_fd, artifact.sha256().c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return false;
  std::set<std::string> directories;
  for (const v1::BuildFile& file : artifact.files()) {
    struct stat blob;
    if (::lstat(BlobPath(file.sha256()).c_str(), &blob) != 0) return false;
    // Each component opened without following: a symlink on the way is
    // not the agent's.
    const std::vector<std::string> parts = absl::StrSplit(file.path(), '/');
    UniqueFd at(::fcntl(dir.get(), F_DUPFD_CLOEXEC, 0));
    std::string prefix;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      at.reset(::openat(at.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!at.valid()) return false;
      prefix = prefix.empty() ? parts[i] : absl::StrCat(prefix, "/", parts[i]);
      directories.insert(prefix);
    }
    struct stat linked;
    if (::fstatat(at.get(), parts.back().c_str(), &linked, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(linked.st_mode) || linked.st_ino != blob.st_ino || linked.st_dev != blob.st_dev) {
      return false;
    }
  }
  // Nothing else in it: a planted extra file or link makes it incomplete.
  size_t expected = static_cast<size_t>(artifact.files_size()) + directories.size();
  size_t seen = 0;
  std::vector<std::pair<UniqueFd, int>> stack;
  stack.emplace_back(UniqueFd(::fcntl(dir.get(), F_DUPFD_CLOEXEC, 0)), 0);
  while (!stack.empty()) {
    UniqueFd current = std::move(stack.back().first);
    const int depth = stack.back().second;
    stack.pop_back();
    if (!current.valid() || depth > 32) return false;
    DIR* listing = ::fdopendir(::fcntl(current.get(), F_DUPFD_CLOEXEC, 0));
    if (listing == nullptr) return false;
    while (const struct dirent* entry = ::readdir(listing)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      if (++seen > expected) {
        ::closedir(listing);
        return false;
      }
      struct stat info;
      if (::fstatat(current.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISDIR(info.st_mode)) {
        stack.emplace_back(UniqueFd(::openat(current.get(), name.c_str(),
                                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)),
                           depth + 1);
      }
    }
    ::closedir(listing);
  }
  return seen == expected;
}

absl::Status LocalBuildCache::Publish(const v1::Artifact& artifact) {
  UniqueFd builds(::open(builds_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!builds.valid()) return Errno("open", builds_dir_);
  if (BuildDirectoryComplete(builds.get(), artifact)) return absl::OkStatus();
  UniqueFd cache(::open(options_.cache_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cache.valid()) return Errno("open", options_.cache_dir);

  StampCarrier carrier;
  for (const Blob& blob : BlobsOf(artifact)) carrier.Remember(BlobPath(blob.sha256));

  // A fresh staging directory, locked while it is assembled so another
  // process's clean-up leaves it alone.
  std::string staging_name;
  std::random_device random;
  for (int attempt = 0; attempt < 16 && staging_name.empty(); ++attempt) {
    char suffix[9];
    std::snprintf(suffix, sizeof(suffix), "%08x", static_cast<unsigned>(random()));
    const std::string name = absl::StrCat(".staging-", artifact.sha256(), "-", suffix);
    if (::mkdirat(builds.get(), name.c_str(), 0755) == 0) staging_name = name;
    else if (errno != EEXIST) return Errno("create", absl::StrCat(builds_dir_, "/", name));
  }
  if (staging_name.empty()) {
    return absl::InternalError(absl::StrCat("cannot create a staging directory in ", builds_dir_));
  }
  const std::string staging_label = absl::StrCat(builds_dir_, "/", staging_name);
  UniqueFd staging(::openat(builds.get(), staging_name.c_str(),
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!staging.valid()) return Errno("open", staging_label);
  ::flock(staging.get(), LOCK_EX | LOCK_NB);
  auto abandon = [&](absl::Status status) {
    (void)RemoveEntryAt(builds.get(), staging_name, staging_label);
    return status;
  };
  // Paths were checked (ValidateArtifact: relative, no "..", no clashes),
  // and each directory is made and opened relative to its parent, without
  // following: nothing planted can send a link outside the staging tree.
  std::map<std::string, UniqueFd> directories;
  for (const v1::BuildFile& file : artifact.files()) {
    const std::vector<std::string> parts = absl::StrSplit(file.path(), '/');
    int at = staging.get();
    std::string prefix;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      prefix = prefix.empty() ? parts[i] : absl::StrCat(prefix, "/", parts[i]);
      auto found = directories.find(prefix);
      if (found == directories.end()) {
        if (::mkdirat(at, parts[i].c_str(), 0755) != 0 && errno != EEXIST) {
          return abandon(Errno("create", absl::StrCat(staging_label, "/", ControlEscaped(prefix))));
        }
        UniqueFd opened(
            ::openat(at, parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!opened.valid()) {
          return abandon(Errno("open", absl::StrCat(staging_label, "/", ControlEscaped(prefix))));
        }
        found = directories.emplace(prefix, std::move(opened)).first;
      }
      at = found->second.get();
    }
    if (::linkat(cache.get(), file.sha256().c_str(), at, parts.back().c_str(), 0) != 0) {
      return abandon(Errno("link", absl::StrCat(staging_label, "/", ControlEscaped(file.path()))));
    }
  }
  for (auto& [name, fd] : directories) ::fsync(fd.get());
  if (::fsync(staging.get()) != 0) return abandon(Errno("sync", staging_label));

  const std::string& name = artifact.sha256();
  struct stat existing;
  if (::fstatat(builds.get(), name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(existing.st_mode)) {
      // An incomplete or garbled directory is swapped out in one step (the
      // path never lacks a directory), then removed.
      log::Warn("build cache: {} was incomplete or not the agent's; replacing it",
                BuildPath(name));
      if (::renameat2(builds.get(), staging_name.c_str(), builds.get(), name.c_str(),
                      RENAME_EXCHANGE) == 0) {
        (void)RemoveEntryAt(builds.get(), staging_name, staging_label);
        ::fsync(builds.get());
        carrier.Carry();
        return absl::OkStatus();
      }
      if (errno != EINVAL && errno != ENOSYS) return abandon(Errno("replace", BuildPath(name)));
      // A filesystem without RENAME_EXCHANGE: the old one goes first.
      if (absl::Status removed = RemoveEntryAt(builds.get(), name, BuildPath(name));
          !removed.ok()) {
        return abandon(removed);
      }
    } else {
      // A symlink or other node planted there goes as what it is.
      ::unlinkat(builds.get(), name.c_str(), 0);
    }
  }
  if (::renameat(builds.get(), staging_name.c_str(), builds.get(), name.c_str()) != 0) {
    return abandon(Errno("publish", BuildPath(name)));
  }
  if (::fsync(builds.get()) != 0) return Errno("sync", builds_dir_);
  carrier.Carry();
  return absl::OkStatus();
}

void LocalBuildCache::MarkUsed(const v1::Artifact& artifact) {
  // Its digests name the files touched: only a well-formed artifact's.
  if (!HasArtifact(artifact) || !ValidateArtifact(artifact).ok()) return;
  // The blobs' own mtimes are never touched: their stamps record them, and
  // a change would force a full re-hash. Their stamps' and the build
  // directory's mtimes are the record.
  for (const Blob& blob : BlobsOf(artifact)) {
    ::utimensat(AT_FDCWD, StampPathFor(BlobPath(blob.sha256)).c_str(), nullptr,
                AT_SYMLINK_NOFOLLOW);
  }
  if (!artifact.files().empty()) {
    ::utimensat(AT_FDCWD, BuildPath(artifact.sha256()).c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
  }
}

absl::StatusOr<uint64_t> LocalBuildCache::Collect(const std::vector<const v1::Artifact*>& keep) {
  const Protected protect = ProtectedBy(keep, nullptr);
  ASSIGN_OR_RETURN(CacheContents contents, ScanCache(options_.cache_dir));
  uint64_t freed = 0;
  RemoveIdleStaging(contents);
  // A partial download is kept for the next attempt to resume (a boot that
  // fell back after a transfer broke off hands over, and collects, before
  // that attempt), unless it is old enough that nobody is coming back for
  // it, or its bytes are needed: then it goes first, oldest first.
  std::vector<const CachePartial*> partials;
  for (const CachePartial& partial : contents.partials) {
    if (!partial.being_written) partials.push_back(&partial);
  }
  std::sort(partials.begin(), partials.end(), [](const CachePartial* a, const CachePartial* b) {
    return a->modified < b->modified;
  });
  uint64_t held = UsedBytes(contents);
  for (const CachePartial* partial : partials) {
    const bool abandoned = clock_->Now() - partial->modified > kPartialDownloadLifetime;
    if (!abandoned && Fits(held, 0, FreeBytesOn(options_.cache_dir))) continue;
    absl::StatusOr<uint64_t> removed = RemoveIdlePartial(options_.cache_dir, partial->sha256);
    if (removed.ok()) {
      freed += *removed;
      held -= std::min(held, *removed);
      log::Info("build cache: removed {} partial download {}.partial ({} bytes)",
                abandoned ? "abandoned" : "a", BlobPath(partial->sha256), *removed);
    }
  }
  for (const CacheBuildDirectory& build : contents.builds) {
    if (protect.builds.count(build.sha256) == 0) RemoveBuildDirectory(build.sha256);
  }
  ASSIGN_OR_RETURN(contents, ScanCache(options_.cache_dir));
  uint64_t used = UsedBytes(contents);
  std::vector<const CacheBlob*> candidates;
  for (const CacheBlob& blob : contents.blobs) {
    if (protect.blobs.count(blob.sha256) == 0) candidates.push_back(&blob);
  }
  std::sort(candidates.begin(), candidates.end(), [](const CacheBlob* a, const CacheBlob* b) {
    return a->last_used < b->last_used;
  });
  for (const CacheBlob* blob : candidates) {
    if (Fits(used, 0, FreeBytesOn(options_.cache_dir))) break;
    freed += EvictBlob(*blob, protect);
    used -= std::min(used, blob->size_bytes);
  }
  return freed;
}

}  // namespace

std::unique_ptr<BuildCache> MakeBuildCache(BuildCacheOptions options, Clock* clock) {
  return std::make_unique<LocalBuildCache>(std::move(options), clock);
}

BuildCacheOptions BuildCacheOptionsFor(const AgentConfig& config) {
  BuildCacheOptions options;
  options.cache_dir = config.cache_dir;
  options.max_bytes = config.cache_max_bytes;
  options.min_free_bytes = config.cache_reserve_bytes;
  options.parallel_downloads = config.parallel_downloads;
  options.max_download_rate = config.max_download_rate;
  options.mirrors = config.artifact_mirrors;
  options.mirror_stall_timeout = config.mirror_stall_timeout;
  return options;
}

bool HasArtifact(const v1::Artifact& artifact) {
  return !artifact.uri().empty() || !artifact.files().empty();
}

}  // namespace weightpath::agent
