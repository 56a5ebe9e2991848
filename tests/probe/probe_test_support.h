// Helpers shared by the probe suites: running the probe on a tree under
// tests/data/hardware, and building small throwaway trees for one rule.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/probe/filesystem.h"
#include "agent/probe/probe.h"
#include "gtest/gtest.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::probe::testing {

inline std::string HardwareData(const std::string& device) {
  return std::string(WEIGHTPATH_HARDWARE_DATA) + "/" + device;
}

// A fake NVIDIA library built by tests/probe/CMakeLists.txt ("fake_nvml_h200").
inline std::string FakeNvidia(const std::string& name) {
  return std::string(WEIGHTPATH_FAKE_NVIDIA_DIR) + "/" + name + ".so";
}

// Probes `root` with nothing of this machine consulted, after `customize`
// has set whatever seams the test needs.
inline absl::StatusOr<v1::HardwareProfile> ProbeTree(
    const std::string& root, const std::function<void(ProbeEnvironment&)>& customize = {}) {
  const auto filesystem = MakeRootedFilesystem(root);
  ProbeEnvironment environment = TreeProbeEnvironment(*filesystem);
  if (customize) customize(environment);
  return ProbeHardware(environment);
}

inline std::vector<std::string> Flags(const v1::HardwareProfile& profile) {
  return {profile.cpu_flags().begin(), profile.cpu_flags().end()};
}

inline std::vector<std::string> Notes(const v1::HardwareProfile& profile) {
  return {profile.probe_notes().begin(), profile.probe_notes().end()};
}

inline std::vector<uint32_t> Cpus(const v1::CpuCluster& cluster) {
  return {cluster.cpus().begin(), cluster.cpus().end()};
}

// A directory under the test's temp dir, removed with the object.
class TempTree {
 public:
  TempTree() {
    std::string pattern = ::testing::TempDir() + "probe_tree_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    root_ = pattern;
  }
  ~TempTree() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  // `path` is absolute as the probe sees it ("/proc/cpuinfo").
  void Write(const std::string& path, const std::string& text) const {
    const std::filesystem::path host = root_ + path;
    std::filesystem::create_directories(host.parent_path());
    std::ofstream(host, std::ios::binary) << text;
  }
  void Symlink(const std::string& path, const std::string& target) const {
    const std::filesystem::path host = root_ + path;
    std::filesystem::create_directories(host.parent_path());
    std::filesystem::create_symlink(target, host);
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace weightpath::probe::testing
