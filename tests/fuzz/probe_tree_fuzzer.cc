// The whole hardware probe over a fuzzed /proc, /sys, /dev and /etc: the
// sysfs walkers (CPU topology and frequencies, PCI devices, DRM and accel
// nodes, thermal zones, NUMA nodes), the cgroup limits, Tegra and Qualcomm
// detection, all reading one in-memory tree.
//
// The input is the tree, as entries that each start on a line of their own:
//   == /proc/cpuinfo            a file; its text is every line up to the
//   processor : 0               next entry (the newline before it excluded)
//   == /sys/.../driver -> ../x  a symbolic link and its target
// Directories are those the paths imply. fuzz_seed_writer (seed_writer.cc)
// turns the captured trees of tests/data/hardware into this form.
//
// The probe promises never to fail because of what it reads (a bad file is
// one line in probe_notes), so any error here is a finding.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "agent/probe/filesystem.h"
#include "agent/probe/probe.h"
#include "agent/probe/profile_text.h"
#include "tests/fuzz/fuzz_support.h"

namespace weightpath::fuzz {
namespace {

// "/a/b/../c" -> "/a/c"; "." and empty components dropped; ".." at the root
// stays at the root, as the kernel does.
std::string Normalise(absl::string_view path) {
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

class MemoryFilesystem : public probe::Filesystem {
 public:
  explicit MemoryFilesystem(absl::string_view archive) {
    directories_.insert("/");
    size_t start = absl::StartsWith(archive, "== ") ? 0 : archive.find("\n== ");
    while (start != absl::string_view::npos) {
      if (archive[start] == '\n') ++start;
      const size_t header_end = archive.find('\n', start);
      const absl::string_view header =
          archive.substr(start + 3, header_end == absl::string_view::npos ? absl::string_view::npos
                                                                         : header_end - start - 3);
      const size_t next = header_end == absl::string_view::npos
                              ? absl::string_view::npos
                              : archive.find("\n== ", header_end);
      absl::string_view body;
      if (header_end != absl::string_view::npos) {
        body = archive.substr(header_end + 1,
                              next == absl::string_view::npos ? absl::string_view::npos
                                                              : next - header_end - 1);
      }
      Add(header, body);
      start = next;
    }
  }

  absl::StatusOr<std::string> ReadFile(absl::string_view path) const override {
    const std::string resolved = Resolve(Normalise(path));
    auto file = files_.find(resolved);
    if (file != files_.end()) return file->second;
    if (directories_.count(resolved) > 0) {
      return absl::UnavailableError(absl::StrCat(path, ": is a directory"));
    }
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }

  absl::StatusOr<std::vector<std::string>> ListDirectory(absl::string_view path) const override {
    const std::string directory = Resolve(Normalise(path));
    if (directories_.count(directory) == 0) {
      return absl::NotFoundError(absl::StrCat(path, ": no such directory"));
    }
    std::set<std::string> names;
    const std::string prefix = directory == "/" ? "/" : directory + "/";
    auto collect = [&](const std::string& entry) {
      if (entry.size() <= prefix.size() || !absl::StartsWith(entry, prefix)) return;
      const std::string rest = entry.substr(prefix.size());
      names.insert(rest.substr(0, rest.find('/')));
    };
    for (const auto& [name, unused] : files_) collect(name);
    for (const auto& [name, unused] : links_) collect(name);
    for (const auto& name : directories_) collect(name);
    return std::vector<std::string>(names.begin(), names.end());
  }

  absl::StatusOr<std::string> ReadSymlink(absl::string_view path) const override {
    auto link = links_.find(Normalise(path));
    if (link == links_.end()) return absl::NotFoundError(absl::StrCat(path, ": not a link"));
    return link->second;
  }

  bool Exists(absl::string_view path) const override {
    const std::string normal = Normalise(path);
    return files_.count(normal) > 0 || links_.count(normal) > 0 || directories_.count(normal) > 0;
  }

  const std::string& root() const override { return root_; }

 private:
  void Add(absl::string_view header, absl::string_view body) {
    const size_t arrow = header.find(" -> ");
    const std::string path = Normalise(header.substr(0, arrow));
    if (path == "/") return;
    for (std::string dir = Parent(path); dir != "/"; dir = Parent(dir)) directories_.insert(dir);
    if (arrow != absl::string_view::npos) {
      links_[path] = std::string(header.substr(arrow + 4));
    } else {
      files_[path] = std::string(body);
    }
  }

  // Follows links in every component, as open() would, at most 16 times.
  std::string Resolve(std::string path) const {
    for (int hops = 0; hops < 16; ++hops) {
      bool followed = false;
      std::string prefix;
      for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
        const std::string candidate = absl::StrCat(prefix, "/", part);
        auto link = links_.find(candidate);
        if (link != links_.end()) {
          const std::string rest = path.substr(candidate.size());
          const std::string& target = link->second;
          path = Normalise(absl::StartsWith(target, "/")
                               ? absl::StrCat(target, rest)
                               : absl::StrCat(Parent(candidate), "/", target, rest));
          followed = true;
          break;
        }
        prefix = candidate;
      }
      if (!followed) return path;
    }
    return path;
  }

  std::map<std::string, std::string> files_;
  std::map<std::string, std::string> links_;
  std::set<std::string> directories_;
  std::string root_ = "/fuzz";
};

}  // namespace
}  // namespace weightpath::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  const std::string_view raw = fuzz::Text(data, size);
  const fuzz::MemoryFilesystem filesystem(absl::string_view(raw.data(), raw.size()));
  probe::ProbeEnvironment environment = probe::TreeProbeEnvironment(filesystem);
  // A container's CPU affinity is one more limit the probe combines.
  environment.allowed_cpu_count = [] { return std::optional<uint32_t>(3); };
  absl::StatusOr<v1::HardwareProfile> profile = probe::ProbeHardware(environment);
  FUZZ_CHECK(profile.ok(), absl::StrCat("the probe failed on what it read: ",
                                        profile.status().ToString()));
  (void)probe::ProfileText(*profile);
  absl::StatusOr<std::string> json = probe::ProfileJson(*profile);
  FUZZ_CHECK(json.ok(), json.status().ToString());
  return 0;
}
