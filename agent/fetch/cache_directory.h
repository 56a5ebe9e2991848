// What cache_dir holds (build_cache.h describes the layout), read and pruned
// without ever following a link planted in it.
//
// cache_dir is written by the agent only, but whoever can write it must not
// turn the agent's eviction into a way to delete or link files elsewhere:
// every entry is looked at with lstat/fstatat(AT_SYMLINK_NOFOLLOW), every
// directory is opened with O_NOFOLLOW relative to its parent's descriptor,
// and only names of the agent's own forms are touched (`<sha256>`,
// `<sha256>.verified`, `<sha256>.partial`, `builds/<sha256>`,
// `builds/.staging-<sha256>-<suffix>`). A symlink, FIFO or device is never
// followed or opened for reading: at a partial file's, a staging
// directory's or a build directory's name (or as `builds/` itself) it is
// removed as the link or node it is when that entry is pruned or replaced;
// at a blob's name it is listed as ignored (a build needing that blob finds
// it unusable and replaces it). Names of no form of the agent's are left
// alone and listed as ignored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace weightpath::agent {

struct CacheBlob {
  std::string sha256;
  uint64_t size_bytes = 0;
  uint64_t inode = 0;
  uint64_t links = 0;        // st_nlink: 1 + the build directories holding it
  bool stamped = false;      // a .verified stamp is beside it
  // The latest of: its download (the blob's mtime), its stamp's mtime (each
  // verification and MarkUsed), and the directories of builds holding it.
  absl::Time last_used;
  std::vector<std::string> builds;  // build directories holding it
};

struct CachePartial {
  std::string sha256;
  uint64_t size_bytes = 0;
  absl::Time modified;
  bool being_written = false;  // a download holds its lock
};

struct CacheBuildDirectory {
  std::string sha256;  // the manifest's: the build's artifact.sha256
  int files = 0;       // regular files in it
  absl::Time last_used;  // its mtime (MarkUsed)
};

struct CacheContents {
  std::vector<CacheBlob> blobs;            // sorted by sha256
  std::vector<CachePartial> partials;      // sorted by sha256
  std::vector<CacheBuildDirectory> builds; // sorted by sha256
  std::vector<std::string> staging;        // names under builds/
  std::vector<std::string> ignored;        // names of no form of the agent's (escaped)
  uint64_t blob_bytes = 0;
  uint64_t partial_bytes = 0;
};

// Reads cache_dir. A missing cache_dir is empty. Build directories are
// walked (at most trust::kMaxBuildFilePathDepth deep and a bounded number of
// entries) to find which blobs each holds, by inode.
absl::StatusOr<CacheContents> ScanCache(const std::string& cache_dir);

// Bytes an unprivileged process may still write on the volume of `path`;
// -1 when it cannot be asked.
int64_t FreeBytesOn(const std::string& path);

// Removes `name` under the directory `parent_fd`: a directory with all it
// holds (descending with O_NOFOLLOW, so a symlink inside is unlinked, never
// followed), anything else with unlinkat. Missing is not an error.
absl::Status RemoveEntryAt(int parent_fd, const std::string& name, const std::string& label);

// The partial file cache_dir/<sha256>.partial, removed unless a download
// holds its lock (then FAILED_PRECONDITION). Its size on success.
absl::StatusOr<uint64_t> RemoveIdlePartial(const std::string& cache_dir,
                                           const std::string& sha256);

}  // namespace weightpath::agent
