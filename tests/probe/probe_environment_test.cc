// Rules exercised on small trees each test writes for itself: cgroup v1,
// CPU affinity, FastRPC variants, Tegra markers, unreadable files and the
// profile-file override.
#include <string>

#include "agent/probe/probe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/probe/probe_test_support.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::probe {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;
using testing::HardwareData;
using testing::Notes;
using testing::ProbeTree;
using testing::TempTree;

constexpr char kFourX86Cpus[] =
    "processor : 0\nflags : avx2\n\nprocessor : 1\nflags : avx2\n\n"
    "processor : 2\nflags : avx2\n\nprocessor : 3\nflags : avx2\n";
constexpr char kOneArmCpu[] = "processor : 0\nFeatures : asimd\nCPU architecture : 8\n";

TEST(ProbeMissingRoot, IsNotFoundNamingTheRoot) {
  EXPECT_THAT(ProbeTree("/nonexistent/probe-root"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/probe-root")));
}

TEST(ProbeEmptyTree, NothingReadableIsNotesNotAnError) {
  TempTree tree;
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("cpu: cannot read /proc/cpuinfo")));
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("memory: cannot read /proc/meminfo")));
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("arch:")));
  EXPECT_EQ(profile->accelerator(), "none");
}

TEST(ProbeMalformedCpuinfo, ParseErrorBecomesANote) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", "processor : 0\nCPU part : nonsense\n");
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_THAT(Notes(*profile), Contains(AllOf(HasSubstr("cpu:"), HasSubstr("'CPU part'"))));
}

TEST(ProbeCgroupV1Container, QuotaAndMemoryLimitFromTheMountRoot) {
  // Without a cgroup namespace /proc/self/cgroup shows the host's path, which
  // does not exist under the container's mounts: the mount root is its cgroup.
  TempTree tree;
  tree.Write("/proc/cpuinfo", kFourX86Cpus);
  tree.Write("/proc/meminfo", "MemTotal: 8388608 kB\nMemAvailable: 8000000 kB\n");
  tree.Write("/proc/self/cgroup", "5:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n");
  tree.Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
  tree.Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  tree.Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->n_logical(), 3u);
  EXPECT_EQ(profile->ram_total_bytes(), 1073741824u);
  EXPECT_EQ(profile->ram_available_bytes(), 1073741824u);
}

TEST(ProbeCgroupV1Container, UnlimitedV1ValuesLeaveTheHostFigures) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", kFourX86Cpus);
  tree.Write("/proc/meminfo", "MemTotal: 8388608 kB\nMemAvailable: 8000000 kB\n");
  tree.Write("/proc/self/cgroup", "5:memory:/\n3:cpu:/\n");
  tree.Write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
  tree.Write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  tree.Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->n_logical(), 4u);
  EXPECT_EQ(profile->ram_total_bytes(), 8388608ull * 1024u);
}

TEST(ProbeCgroupV2, MalformedCpuMaxIsANoteNamingTheFile) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", kFourX86Cpus);
  tree.Write("/proc/self/cgroup", "0::/\n");
  tree.Write("/sys/fs/cgroup/cpu.max", "lots\n");
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->n_logical(), 4u);
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("/sys/fs/cgroup/cpu.max")));
}

TEST(ProbeCgroupV2, RelativeLookingPathStillResolvesUnderTheMount) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", kFourX86Cpus);
  tree.Write("/proc/self/cgroup", "0::app.slice\n");
  tree.Write("/sys/fs/cgroup/app.slice/cpu.max", "100000 100000\n");
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->n_logical(), 1u);
}

TEST(ProbeCpuAffinity, MaskNarrowerThanTheMachineLowersTheCount) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", kFourX86Cpus);
  const auto profile = ProbeTree(tree.root(), [](ProbeEnvironment& env) {
    env.allowed_cpu_count = [] { return std::optional<uint32_t>(3); };
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->n_logical(), 3u);
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("affinity mask allows 3 of 4")));
}

TEST(ProbeMainlineQualcommPhone, FastRpcCdspNodeAndSocMakeAnNpu) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", kOneArmCpu);
  tree.Write("/dev/fastrpc-cdsp", "");
  tree.Write("/sys/devices/soc0/family", "Snapdragon\n");
  tree.Write("/sys/devices/soc0/machine", "SM8550\n");
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "npu:qualcomm");
  EXPECT_EQ(profile->host_os(), "linux");
  ASSERT_THAT(profile->accelerators(), SizeIs(1));
  EXPECT_EQ(profile->accelerators(0).route(), "/dev/fastrpc-cdsp");
  EXPECT_EQ(profile->accelerators(0).name(), "Qualcomm Hexagon NPU (Snapdragon SM8550)");
}

TEST(ProbeFastRpcWithoutSoc, NodeAloneIsReportedUnusable) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", kOneArmCpu);
  tree.Write("/dev/adsprpc-smd", "");
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "none");
  ASSERT_THAT(profile->accelerators(), SizeIs(1));
  EXPECT_FALSE(profile->accelerators(0).usable());
  EXPECT_THAT(profile->accelerators(0).reason(), HasSubstr("/sys/devices/soc0/family"));
}

TEST(ProbeTegraCompatibleOnly, DeviceTreeAloneMakesCudaUnified) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", kOneArmCpu);
  tree.Write("/proc/meminfo", "MemTotal: 7000000 kB\nMemAvailable: 6000000 kB\n");
  tree.Write("/proc/device-tree/compatible", std::string("nvidia,p3768-0000\0nvidia,tegra234\0", 34));
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "cuda_unified");
  EXPECT_EQ(profile->gpu_mem_bytes(), 7000000ull * 1024u);
}

TEST(ProbeTegraReleaseFileOnly, L4tMarkerAloneMakesCudaUnified) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", kOneArmCpu);
  tree.Write("/etc/nv_tegra_release", "# R36 (release)\n");
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "cuda_unified");
  EXPECT_EQ(profile->gpu_name(), "NVIDIA Tegra integrated GPU");
  EXPECT_EQ(profile->accelerators(0).source(), "/etc/nv_tegra_release");
}

TEST(ProbeNvidiaRenderNodeWithoutDriverLibraries, ListedUnusableWithTheReason) {
  TempTree tree;
  tree.Write("/proc/cpuinfo", kFourX86Cpus);
  tree.Write("/dev/dri/renderD128", "");
  tree.Write("/sys/devices/pci0000:00/0000:01:00.0/vendor", "0x10de\n");
  tree.Write("/sys/devices/pci0000:00/0000:01:00.0/device", "0x2684\n");
  tree.Symlink("/sys/devices/pci0000:00/0000:01:00.0/driver", "../../../bus/pci/drivers/nvidia");
  tree.Symlink("/sys/class/drm/renderD128/device", "../../../devices/pci0000:00/0000:01:00.0");
  const auto profile = ProbeTree(tree.root());
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "none");
  ASSERT_THAT(profile->accelerators(), SizeIs(1));
  EXPECT_EQ(profile->accelerators(0).vendor(), "nvidia");
  EXPECT_EQ(profile->accelerators(0).driver(), "nvidia");
  EXPECT_FALSE(profile->accelerators(0).usable());
  EXPECT_THAT(profile->accelerators(0).reason(), HasSubstr("neither the CUDA driver nor NVML"));
}

class ProbeProfileFile : public ::testing::Test {
 protected:
  std::string WriteProfile(const std::string& name, const std::string& json) {
    tree_.Write("/" + name, json);
    return tree_.root() + "/" + name;
  }
  TempTree tree_;
};

TEST_F(ProbeProfileFile, ProjectVariableReplacesTheProbe) {
  const std::string path = WriteProfile(
      "profile.json", R"({"arch": "aarch64", "cpu_model": "Pinned", "n_logical": 6,
                          "accelerator": "none", "key_the_seed_added_later": 1})");
  const auto profile = ProbeTree(HardwareData("amd-zen4-epyc-9654"), [&](ProbeEnvironment& env) {
    env.environment_variables[kProfileFileVariable] = path;
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->source(), "file:" + path);
  EXPECT_EQ(profile->arch(), "aarch64");
  EXPECT_EQ(profile->cpu_model(), "Pinned");
  EXPECT_EQ(profile->n_logical(), 6u);
  EXPECT_THAT(profile->probe_notes(), IsEmpty());
}

TEST_F(ProbeProfileFile, SeedVariableWorksAndProjectVariableWins) {
  const std::string seed = WriteProfile("seed.json", R"({"arch": "x86_64", "cpu_model": "Seed"})");
  const std::string ours = WriteProfile("ours.json", R"({"arch": "x86_64", "cpu_model": "Ours"})");
  auto profile = ProbeTree(HardwareData("aws-graviton3"), [&](ProbeEnvironment& env) {
    env.environment_variables[kSeedProfileFileVariable] = seed;
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->cpu_model(), "Seed");
  EXPECT_EQ(profile->source(), "file:" + seed);
  profile = ProbeTree(HardwareData("aws-graviton3"), [&](ProbeEnvironment& env) {
    env.environment_variables[kSeedProfileFileVariable] = seed;
    env.environment_variables[kProfileFileVariable] = ours;
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->cpu_model(), "Ours");
}

TEST_F(ProbeProfileFile, MissingFileIsNotFoundNamingVariableAndPath) {
  const std::string path = tree_.root() + "/absent.json";
  EXPECT_THAT(ProbeTree(HardwareData("aws-graviton3"),
                        [&](ProbeEnvironment& env) {
                          env.environment_variables[kProfileFileVariable] = path;
                        }),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("WEIGHTPATH_HW_PROFILE"), HasSubstr(path))));
}

TEST_F(ProbeProfileFile, MalformedJsonIsInvalidArgumentNamingTheVariable) {
  const std::string path = WriteProfile("bad.json", R"({"n_logical": "many"})");
  EXPECT_THAT(ProbeTree(HardwareData("aws-graviton3"),
                        [&](ProbeEnvironment& env) {
                          env.environment_variables[kSeedProfileFileVariable] = path;
                        }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("VLLM_OMNI_HW_PROFILE"), HasSubstr("n_logical"))));
}

TEST_F(ProbeProfileFile, EmptyVariableMeansProbe) {
  const auto profile = ProbeTree(HardwareData("aws-graviton3"), [&](ProbeEnvironment& env) {
    env.environment_variables[kProfileFileVariable] = "";
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->source(), "probe");
}

}  // namespace
}  // namespace weightpath::probe
