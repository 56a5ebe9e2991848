#include "agent/probe/filesystem.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"

namespace weightpath::probe {
namespace {

// "WHAT PATH: reason": readlink of a file that is not a link is
// INVALID_ARGUMENT (EINVAL), a missing one NOT_FOUND.
absl::Status PathError(int error_number, absl::string_view what, absl::string_view path) {
  return ErrnoStatus(error_number, absl::StrCat(what, " ", path));
}

class RootedFilesystem final : public Filesystem {
 public:
  explicit RootedFilesystem(std::string root) : root_(std::move(root)) {
    // Paths are joined as root_ + path, and every probe path starts with '/'.
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
    host_prefix_ = root_ == "/" ? "" : root_;
  }

  absl::StatusOr<std::string> ReadFile(absl::string_view path) const override {
    const std::string host_path = HostPath(path);
    // /proc and /sys files report size 0, so read until EOF rather than by
    // stat size.
    std::ifstream in(host_path, std::ios::binary);
    if (!in) return PathError(errno, "cannot read", path);
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return absl::UnavailableError(absl::StrCat("error while reading ", path));
    return std::move(text).str();
  }

  absl::StatusOr<std::vector<std::string>> ListDirectory(absl::string_view path) const override {
    const std::string host_path = HostPath(path);
    DIR* directory = opendir(host_path.c_str());
    if (directory == nullptr) return PathError(errno, "cannot list", path);
    std::vector<std::string> names;
    while (const dirent* entry = readdir(directory)) {
      absl::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      names.emplace_back(name);
    }
    closedir(directory);
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::StatusOr<std::string> ReadSymlink(absl::string_view path) const override {
    const std::string host_path = HostPath(path);
    std::string target(4096, '\0');
    const ssize_t length = readlink(host_path.c_str(), target.data(), target.size());
    if (length < 0) return PathError(errno, "cannot read link", path);
    target.resize(static_cast<size_t>(length));
    return target;
  }

  bool Exists(absl::string_view path) const override {
    struct stat info;
    return lstat(HostPath(path).c_str(), &info) == 0;
  }

  const std::string& root() const override { return root_; }

 private:
  std::string HostPath(absl::string_view path) const { return absl::StrCat(host_prefix_, path); }

  std::string root_;
  std::string host_prefix_;
};

}  // namespace

std::unique_ptr<Filesystem> MakeRootedFilesystem(std::string root) {
  return std::make_unique<RootedFilesystem>(std::move(root));
}

absl::string_view PathBasename(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace weightpath::probe
