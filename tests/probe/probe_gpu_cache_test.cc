// The GPU inventory kept between boots (agent/probe/gpu_inventory.h): reused
// while the fingerprint of what the driver exposes without being loaded is
// the same, asked again when it changes, and never trusted when the file
// is not one the probe wrote.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/probe/gpu_inventory.h"
#include "agent/probe/probe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/probe/probe_test_support.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::probe {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::weightpath::testing::IsOk;
using testing::FakeNvidia;
using testing::Notes;
using testing::ProbeTree;
using testing::TempTree;

// A machine with one NVIDIA PCI function and driver 580, its cache file in
// a state directory beside the tree.
class ProbeGpuCache : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.Write("/proc/driver/nvidia/version",
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 2025\n");
    tree_.Write("/sys/bus/pci/devices/0000:19:00.0/vendor", "0x10de\n");
    tree_.Write("/sys/bus/pci/devices/0000:19:00.0/device", "0x2335\n");
    tree_.Write("/sys/bus/pci/devices/0000:19:00.0/class", "0x030200\n");
    tree_.Write("/sys/bus/pci/devices/0000:00:00.0/vendor", "0x8086\n");
    cache_ = state_.root() + "/" + kGpuInventoryFileName;
  }

  absl::StatusOr<v1::HardwareProfile> Probe(const std::string& nvml, const std::string& cuda = "",
                                            std::optional<std::string> visible = {}) {
    return ProbeTree(tree_.root(), [&](ProbeEnvironment& env) {
      if (!nvml.empty()) env.gpu_libraries.nvml = {FakeNvidia(nvml)};
      if (!cuda.empty()) env.gpu_libraries.cuda = {FakeNvidia(cuda)};
      if (visible) env.environment_variables[kCudaVisibleDevicesVariable] = *visible;
      env.gpu_inventory_cache = cache_;
    });
  }

  std::string Fingerprint() {
    const auto filesystem = MakeRootedFilesystem(tree_.root());
    ProbeEnvironment env = TreeProbeEnvironment(*filesystem);
    return GpuFingerprint(env).value_or("");
  }

  TempTree tree_;
  TempTree state_;
  std::string cache_;
};

TEST_F(ProbeGpuCache, WarmProbeReusesTheInventoryWithoutTheDriver) {
  const auto cold = Probe("fake_nvml_h200");
  ASSERT_THAT(cold, IsOk());
  EXPECT_EQ(cold->gpu_inventory_source(), "nvml");
  // A driver that fails now is not asked: nothing it exposes changed.
  const auto warm = Probe("fake_nvml_driver_not_loaded");
  ASSERT_THAT(warm, IsOk());
  EXPECT_EQ(warm->gpu_inventory_source(), "cache");
  EXPECT_EQ(warm->gpus_probed_unix_seconds(), cold->gpus_probed_unix_seconds());
  EXPECT_EQ(warm->gpu_name(), "NVIDIA H200");
  EXPECT_EQ(warm->gpu_sm_count(), 132u);
  EXPECT_EQ(warm->gpus(0).uuid(), cold->gpus(0).uuid());
  EXPECT_EQ(warm->gpus(0).memory_free_bytes(), cold->gpus(0).memory_free_bytes());
  EXPECT_EQ(warm->gpu_driver_version(), "580.95.05");
  EXPECT_THAT(Notes(*warm), Contains(HasSubstr("free memory is as of then")));
}

TEST_F(ProbeGpuCache, ATemporaryLeftByAKilledProbeIsRemovedWhenTheCacheIsWritten) {
  // What a probe killed before its rename leaves, two minutes old, and one
  // of a probe writing right now, which is left alone.
  const std::string stale = state_.root() + "/." + kGpuInventoryFileName + ".tmp.Ab12Cd";
  const std::string fresh = state_.root() + "/." + kGpuInventoryFileName + ".tmp.Ef34Gh";
  std::ofstream(stale) << "half";
  std::ofstream(fresh) << "half";
  const auto two_minutes_ago = std::filesystem::file_time_type::clock::now() - std::chrono::minutes(2);
  std::filesystem::last_write_time(stale, two_minutes_ago);
  ASSERT_THAT(Probe("fake_nvml_h200"), IsOk());
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(fresh));
  EXPECT_TRUE(std::filesystem::exists(cache_));
}

TEST_F(ProbeGpuCache, SlowCuInitIsPaidOnceThenWarmIsFast) {
  const auto start = std::chrono::steady_clock::now();
  const auto cold = Probe("", "fake_cuda_h200_slow");
  const auto middle = std::chrono::steady_clock::now();
  const auto warm = Probe("", "fake_cuda_h200_slow");
  const auto end = std::chrono::steady_clock::now();
  ASSERT_THAT(cold, IsOk());
  ASSERT_THAT(warm, IsOk());
  EXPECT_EQ(cold->gpu_inventory_source(), "cuda");
  EXPECT_EQ(warm->gpu_inventory_source(), "cache");
  EXPECT_GE(middle - start, std::chrono::milliseconds(250));
  // The whole warm probe (CPU, memory, limits too) stays far from cuInit's
  // 250 ms; its figure on a quiet machine is in bench/RESULTS-probe.md.
  EXPECT_LT(end - middle, std::chrono::milliseconds(150));
  EXPECT_EQ(warm->gpus(0).cuda_ordinal(), 0u);
}

TEST_F(ProbeGpuCache, AChangedFingerprintAsksTheDriverAgain) {
  ASSERT_THAT(Probe("fake_nvml_h200"), IsOk());
  // A driver upgrade.
  tree_.Write("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.1\n");
  const auto upgraded = Probe("fake_nvml_driver_not_loaded");
  ASSERT_THAT(upgraded, IsOk());
  EXPECT_EQ(upgraded->accelerator(), "none");
  EXPECT_THAT(Notes(*upgraded), Contains(HasSubstr("nvmlInit_v2 failed")));

  // A GPU added, a MIG instance created, the engine's visibility changed:
  // each one is a new fingerprint.
  ASSERT_THAT(Probe("fake_nvml_h200"), IsOk());
  std::string before = Fingerprint();
  tree_.Write("/sys/bus/pci/devices/0000:2a:00.0/vendor", "0x10de\n");
  EXPECT_NE(Fingerprint(), before);
  before = Fingerprint();
  tree_.Write("/proc/driver/nvidia/capabilities/gpu0/mig/gi1/access", "DeviceFileMinor: 12\n");
  EXPECT_NE(Fingerprint(), before);
  ASSERT_THAT(Probe("fake_nvml_h200"), IsOk());
  const auto hidden = Probe("fake_nvml_driver_not_loaded", "", "");
  ASSERT_THAT(hidden, IsOk());
  EXPECT_THAT(hidden->gpu_inventory_source(), IsEmpty());  // asked, and it failed
}

TEST_F(ProbeGpuCache, NoNvidiaMarkersMeansNothingIsCached) {
  TempTree bare;
  bare.Write("/proc/meminfo", "MemTotal: 1024 kB\n");
  const auto profile = ProbeTree(bare.root(), [&](ProbeEnvironment& env) {
    env.gpu_libraries.nvml = {FakeNvidia("fake_nvml_h200")};
    env.gpu_inventory_cache = cache_;
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_inventory_source(), "nvml");
  EXPECT_FALSE(std::filesystem::exists(cache_));
}

TEST_F(ProbeGpuCache, GarbageIsIgnoredAndReplaced) {
  std::ofstream(cache_) << "weightpath-gpu-inventory 1\n99999999\n\xff\xfe garbage";
  const auto profile = Probe("fake_nvml_h200");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_inventory_source(), "nvml");
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("ignored (malformed fingerprint length)")));
  EXPECT_EQ(Probe("fake_nvml_driver_not_loaded")->gpu_inventory_source(), "cache");
}

TEST_F(ProbeGpuCache, AForgedInventoryOutOfBoundsIsRefused) {
  // The right fingerprint, then 65 GPUs: more than the probe ever writes.
  v1::HardwareProfile forged;
  forged.set_gpu_inventory_source("nvml");
  for (int i = 0; i < 65; ++i) {
    v1::GpuDevice& gpu = *forged.add_gpus();
    gpu.set_name("forged");
    gpu.set_memory_total_bytes(1);
    gpu.add_capability(9);
    gpu.add_capability(0);
  }
  const std::string fingerprint = Fingerprint() + std::string(kCudaVisibleDevicesVariable).substr(0, 0);
  ASSERT_FALSE(fingerprint.empty());
  std::ofstream(cache_) << "weightpath-gpu-inventory 1\n"
                        << fingerprint.size() << "\n"
                        << fingerprint << forged.SerializeAsString();
  const auto profile = Probe("fake_nvml_h200");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_inventory_source(), "nvml");
  EXPECT_THAT(profile->gpus(), ::testing::SizeIs(1));
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("out of bounds")));
  // A name longer than any driver string is refused the same way.
  forged.clear_gpus();
  v1::GpuDevice& gpu = *forged.add_gpus();
  gpu.set_name(std::string(100000, 'x'));
  gpu.set_memory_total_bytes(1);
  gpu.add_capability(9);
  gpu.add_capability(0);
  std::ofstream(cache_) << "weightpath-gpu-inventory 1\n"
                        << fingerprint.size() << "\n"
                        << fingerprint << forged.SerializeAsString();
  const auto again = Probe("fake_nvml_h200");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->gpu_name(), "NVIDIA H200");
}

TEST_F(ProbeGpuCache, ASymlinkOrFifoInItsPlaceIsNeverRead) {
  // A planted link to a file that would parse is refused, not followed.
  ASSERT_THAT(Probe("fake_nvml_h200"), IsOk());
  const std::string real = state_.root() + "/elsewhere";
  std::filesystem::rename(cache_, real);
  std::filesystem::create_symlink(real, cache_);
  const auto linked = Probe("fake_nvml_driver_not_loaded");
  ASSERT_THAT(linked, IsOk());
  EXPECT_NE(linked->gpu_inventory_source(), "cache");
  EXPECT_THAT(Notes(*linked), Contains(HasSubstr("symbolic link")));

  std::filesystem::remove(cache_);
  ASSERT_EQ(mkfifo(cache_.c_str(), 0600), 0);
  const auto fifo = Probe("fake_nvml_h200");  // returns: the FIFO is not opened blocking
  ASSERT_THAT(fifo, IsOk());
  EXPECT_EQ(fifo->gpu_inventory_source(), "nvml");
  // Replaced by the probe's own file (a rename over the FIFO).
  EXPECT_EQ(Probe("fake_nvml_driver_not_loaded")->gpu_inventory_source(), "cache");

  std::filesystem::remove(cache_);
  std::ofstream(cache_) << std::string(kMaxGpuInventoryFileBytes + 1, 'x');
  const auto huge = Probe("fake_nvml_h200");
  ASSERT_THAT(huge, IsOk());
  EXPECT_EQ(huge->gpu_inventory_source(), "nvml");
}

TEST_F(ProbeGpuCache, VisibilityIsAppliedToACachedInventoryToo) {
  ASSERT_THAT(Probe("fake_nvml_dgx_h100", "", "2"), IsOk());
  const auto warm = Probe("fake_nvml_driver_not_loaded", "", "2");
  ASSERT_THAT(warm, IsOk());
  EXPECT_EQ(warm->gpu_inventory_source(), "cache");
  ASSERT_EQ(warm->gpus_size(), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(warm->gpus(i).usable(), i == 2) << i;
}

}  // namespace
}  // namespace weightpath::probe
