#include "agent/fetch/cache_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/fetch/sha256_file.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "trust/build_manifest.h"

namespace weightpath::agent {
namespace {

// A build directory holds at most kMaxBuildFiles files and their folders;
// a walk that meets more has met something the agent did not make.
constexpr size_t kMaxWalkEntries = 2 * trust::kMaxBuildFiles + 64;

absl::Time MtimeOf(const struct stat& info) {
  return absl::FromUnixSeconds(info.st_mtim.tv_sec) + absl::Nanoseconds(info.st_mtim.tv_nsec);
}

std::vector<std::string> ListNames(int dir_fd) {
  std::vector<std::string> names;
  const int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return names;
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    ::close(copy);
    return names;
  }
  ::rewinddir(dir);
  while (const struct dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

UniqueFd OpenDirectoryAt(int parent_fd, const std::string& name) {
  return UniqueFd(
      ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// Regular files (by inode) under the directory `dir_fd`, not following
// anything; false when the tree is deeper or larger than a build can be.
bool CollectInodes(int dir_fd, size_t depth, size_t* entries, std::vector<uint64_t>* inodes) {
  if (depth > trust::kMaxBuildFilePathDepth) return false;
  for (const std::string& name : ListNames(dir_fd)) {
    if (++*entries > kMaxWalkEntries) return false;
    struct stat info;
    if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(info.st_mode)) {
      inodes->push_back(static_cast<uint64_t>(info.st_ino));
    } else if (S_ISDIR(info.st_mode)) {
      UniqueFd child = OpenDirectoryAt(dir_fd, name);
      if (!child.valid() || !CollectInodes(child.get(), depth + 1, entries, inodes)) return false;
    }
  }
  return true;
}

bool IsStagingName(const std::string& name) {
  // .staging-<64 hex>-<suffix>
  constexpr absl::string_view kPrefix = ".staging-";
  if (!absl::StartsWith(name, kPrefix) || name.size() < kPrefix.size() + 66) return false;
  return IsSha256Hex(name.substr(kPrefix.size(), 64)) && name[kPrefix.size() + 64] == '-';
}

absl::Status RemoveTreeContents(int dir_fd, size_t depth, const std::string& label) {
  // Deeper than a build can be: something the agent did not make, and a
  // hostile tree must not exhaust descriptors or the stack.
  if (depth > trust::kMaxBuildFilePathDepth + 2) {
    return absl::FailedPreconditionError(absl::StrCat("not removing ", label, ": too deep"));
  }
  for (const std::string& name : ListNames(dir_fd)) {
    struct stat info;
    if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(info.st_mode)) {
      UniqueFd child = OpenDirectoryAt(dir_fd, name);
      if (!child.valid()) {
        return absl::InternalError(absl::StrCat("cannot open ", label, "/", ControlEscaped(name),
                                                ": ", std::strerror(errno)));
      }
      RETURN_IF_ERROR(RemoveTreeContents(child.get(), depth + 1, label));
      if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return absl::InternalError(absl::StrCat("cannot remove ", label, "/",
                                                ControlEscaped(name), ": ", std::strerror(errno)));
      }
    } else if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return absl::InternalError(absl::StrCat("cannot remove ", label, "/", ControlEscaped(name),
                                              ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t FreeBytesOn(const std::string& path) {
  struct statvfs volume;
  if (::statvfs(path.c_str(), &volume) != 0) return -1;
  return static_cast<int64_t>(static_cast<uint64_t>(volume.f_bavail) *
                              static_cast<uint64_t>(volume.f_frsize));
}

absl::Status RemoveEntryAt(int parent_fd, const std::string& name, const std::string& label) {
  struct stat info;
  if (::fstatat(parent_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("cannot stat ", label, ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(info.st_mode)) {
    if (::unlinkat(parent_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return absl::InternalError(absl::StrCat("cannot remove ", label, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  UniqueFd dir = OpenDirectoryAt(parent_fd, name);
  if (!dir.valid()) {
    return absl::InternalError(absl::StrCat("cannot open ", label, ": ", std::strerror(errno)));
  }
  RETURN_IF_ERROR(RemoveTreeContents(dir.get(), 0, label));
  if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("cannot remove ", label, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RemoveIdlePartial(const std::string& cache_dir,
                                           const std::string& sha256) {
  const std::string path = absl::StrCat(cache_dir, "/", sha256, ".partial");
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return 0;
  if (!S_ISREG(info.st_mode)) {
    // Not the agent's file: a link or node in its place goes as what it is.
    ::unlink(path.c_str());
    return 0;
  }
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!file.valid()) return 0;
  if (::flock(file.get(), LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is being written by a download"));
  }
  // Unlinked while locked: no download can have started on it meanwhile.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("cannot remove ", path, ": ", std::strerror(errno)));
  }
  return static_cast<uint64_t>(info.st_size);
}

absl::StatusOr<CacheContents> ScanCache(const std::string& cache_dir) {
  CacheContents contents;
  UniqueFd root(::open(cache_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) {
    if (errno == ENOENT) return contents;
    return absl::InternalError(
        absl::StrCat("cannot open cache_dir ", cache_dir, ": ", std::strerror(errno)));
  }
  std::map<uint64_t, size_t> blob_by_inode;
  std::map<std::string, absl::Time> stamp_times;
  for (const std::string& name : ListNames(root.get())) {
    struct stat info;
    if (::fstatat(root.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const bool regular = S_ISREG(info.st_mode);
    if (IsSha256Hex(name) && regular) {
      CacheBlob blob;
      blob.sha256 = name;
      blob.size_bytes = static_cast<uint64_t>(info.st_size);
      blob.inode = static_cast<uint64_t>(info.st_ino);
      blob.links = static_cast<uint64_t>(info.st_nlink);
      blob.last_used = MtimeOf(info);
      contents.blob_bytes += blob.size_bytes;
      contents.blobs.push_back(std::move(blob));
    } else if (name.size() == 64 + 8 && absl::EndsWith(name, ".partial") &&
               IsSha256Hex(name.substr(0, 64)) && regular) {
      CachePartial partial;
      partial.sha256 = name.substr(0, 64);
      partial.size_bytes = static_cast<uint64_t>(info.st_size);
      partial.modified = MtimeOf(info);
      UniqueFd file(::openat(root.get(), name.c_str(),
                             O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (file.valid()) {
        partial.being_written = ::flock(file.get(), LOCK_SH | LOCK_NB) != 0;
      }
      contents.partial_bytes += partial.size_bytes;
      contents.partials.push_back(std::move(partial));
    } else if (name.size() == 64 + 9 && absl::EndsWith(name, ".verified") &&
               IsSha256Hex(name.substr(0, 64)) && regular) {
      stamp_times[name.substr(0, 64)] = MtimeOf(info);
    } else if (name == "builds" && S_ISDIR(info.st_mode)) {
      // Read below.
    } else if (absl::StartsWith(name, ".") && absl::StrContains(name, ".tmp.")) {
      // A stamp's temporary file (atomic_file.h): boot's clean-up owns it.
    } else {
      contents.ignored.push_back(ControlEscaped(name));
    }
  }
  std::sort(contents.blobs.begin(), contents.blobs.end(),
            [](const CacheBlob& a, const CacheBlob& b) { return a.sha256 < b.sha256; });
  std::sort(contents.partials.begin(), contents.partials.end(),
            [](const CachePartial& a, const CachePartial& b) { return a.sha256 < b.sha256; });
  for (size_t i = 0; i < contents.blobs.size(); ++i) {
    CacheBlob& blob = contents.blobs[i];
    blob_by_inode[blob.inode] = i;
    if (auto stamp = stamp_times.find(blob.sha256); stamp != stamp_times.end()) {
      blob.stamped = true;
      blob.last_used = std::max(blob.last_used, stamp->second);
    }
  }
  UniqueFd builds = OpenDirectoryAt(root.get(), "builds");
  if (!builds.valid()) return contents;
  for (const std::string& name : ListNames(builds.get())) {
    struct stat info;
    if (::fstatat(builds.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (IsStagingName(name)) {
      contents.staging.push_back(name);
      continue;
    }
    if (!IsSha256Hex(name) || !S_ISDIR(info.st_mode)) {
      contents.ignored.push_back(absl::StrCat("builds/", ControlEscaped(name)));
      continue;
    }
    CacheBuildDirectory build;
    build.sha256 = name;
    build.last_used = MtimeOf(info);
    std::vector<uint64_t> inodes;
    size_t entries = 0;
    UniqueFd dir = OpenDirectoryAt(builds.get(), name);
    if (dir.valid()) CollectInodes(dir.get(), 0, &entries, &inodes);
    build.files = static_cast<int>(inodes.size());
    std::sort(inodes.begin(), inodes.end());
    inodes.erase(std::unique(inodes.begin(), inodes.end()), inodes.end());
    for (uint64_t inode : inodes) {
      if (auto blob = blob_by_inode.find(inode); blob != blob_by_inode.end()) {
        CacheBlob& held = contents.blobs[blob->second];
        held.builds.push_back(name);
        held.last_used = std::max(held.last_used, build.last_used);
      }
    }
    contents.builds.push_back(std::move(build));
  }
  std::sort(contents.builds.begin(), contents.builds.end(),
            [](const CacheBuildDirectory& a, const CacheBuildDirectory& b) {
              return a.sha256 < b.sha256;
            });
  std::sort(contents.staging.begin(), contents.staging.end());
  for (CacheBlob& blob : contents.blobs) std::sort(blob.builds.begin(), blob.builds.end());
  return contents;
}

}  // namespace weightpath::agent
