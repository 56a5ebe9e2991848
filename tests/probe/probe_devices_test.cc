// The probe on the captured and synthetic trees of tests/data/hardware, one
// suite per device. Each tree's README says which files are real captures.
#include <sys/sysinfo.h>

#include <string>

#include "agent/probe/probe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/hardware_class.h"
#include "tests/probe/probe_test_support.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::probe {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using ::weightpath::testing::IsOk;
using testing::Cpus;
using testing::Flags;
using testing::HardwareData;
using testing::Notes;
using testing::ProbeTree;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kGiB = 1024 * 1024 * 1024;

std::string ClassOf(const v1::HardwareProfile& profile) {
  const auto hardware_class = policy::ClassifyHardware(profile);
  if (!hardware_class.ok()) return std::string(hardware_class.status().message());
  return std::string(policy::HardwareClassName(*hardware_class));
}

void GrantAmx(ProbeEnvironment& environment) {
  environment.request_amx_permission = [] { return AmxPermission{}; };
}

TEST(ProbeIntelSapphireRapids, AmxConfirmedByKernelMakesAnAmxX86Cpu) {
  const auto profile = ProbeTree(HardwareData("intel-sapphire-rapids"), GrantAmx);
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->source(), "probe");
  EXPECT_EQ(profile->arch(), "x86_64");
  EXPECT_EQ(profile->cpu_model(), "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_THAT(Flags(*profile),
              ElementsAre("avx2", "avx512f", "avx512", "avx512_bf16", "avx512_vnni", "amx_bf16",
                          "amx_tile", "amx_int8", "fma", "f16c"));
  // The capture is a single stanza (processor 2): one logical CPU, one core.
  EXPECT_EQ(profile->n_logical(), 1u);
  EXPECT_EQ(profile->n_physical(), 1u);
  EXPECT_EQ(profile->ram_total_bytes(), 268435456 * kKiB);
  EXPECT_EQ(profile->ram_available_bytes(), 251658240 * kKiB);
  EXPECT_TRUE(profile->supports_bf16());
  EXPECT_TRUE(profile->supports_fp16());
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_EQ(profile->host_os(), "linux");
  EXPECT_EQ(ClassOf(*profile), "x86_cpu");
  EXPECT_TRUE(policy::HasAmx(*profile));
  EXPECT_THAT(Notes(*profile), Not(Contains(HasSubstr("amx:"))));
}

TEST(ProbeIntelSapphireRapids, KernelRefusingTheTileStateDropsAmxWithANote) {
  const auto profile = ProbeTree(HardwareData("intel-sapphire-rapids"), [](ProbeEnvironment& env) {
    env.request_amx_permission = [] {
      return AmxPermission{AmxPermission::Answer::kRefused, "Invalid argument"};
    };
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_THAT(Flags(*profile), ElementsAre("avx2", "avx512f", "avx512", "avx512_bf16",
                                           "avx512_vnni", "fma", "f16c"));
  EXPECT_FALSE(policy::HasAmx(*profile));
  EXPECT_THAT(Notes(*profile), Contains(AllOf(HasSubstr("kernel refused the tile state"),
                                              HasSubstr("Invalid argument"))));
  // avx512_bf16 still gives bf16 without AMX.
  EXPECT_TRUE(profile->supports_bf16());
}

TEST(ProbeIntelSapphireRapids, CapturedTreeKeepsAmxUnconfirmedAndSaysSo) {
  const auto profile = ProbeTree(HardwareData("intel-sapphire-rapids"));
  ASSERT_THAT(profile, IsOk());
  EXPECT_THAT(Flags(*profile), Contains("amx_tile"));
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("not confirmed")));
}

TEST(ProbeAmdZen4Epyc9654, Avx512WithBf16ButNoAmx) {
  const auto profile = ProbeTree(HardwareData("amd-zen4-epyc-9654"), GrantAmx);
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->arch(), "x86_64");
  EXPECT_EQ(profile->cpu_model(), "AMD EPYC 9654 96-Core Processor");
  // The x86 "sme" flag (memory encryption) must not appear as ARM SME.
  EXPECT_THAT(Flags(*profile), ElementsAre("avx2", "avx512f", "avx512", "avx512_bf16",
                                           "avx512_vnni", "fma", "f16c"));
  EXPECT_EQ(profile->n_logical(), 1u);
  EXPECT_TRUE(profile->supports_bf16());
  EXPECT_FALSE(policy::HasAmx(*profile));
  EXPECT_EQ(ClassOf(*profile), "x86_cpu");
}

TEST(ProbeAwsGraviton3, NeoverseV1NamedFromPartNumber) {
  const auto profile = ProbeTree(HardwareData("aws-graviton3"));
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->arch(), "aarch64");
  EXPECT_EQ(profile->cpu_model(), "Neoverse-V1");
  EXPECT_THAT(Flags(*profile), ElementsAre("asimd", "neon", "asimdhp", "fp16_arith", "asimddp",
                                           "dotprod", "i8mm", "bf16", "sve"));
  EXPECT_EQ(profile->n_logical(), 1u);
  EXPECT_EQ(profile->n_physical(), 1u);
  EXPECT_TRUE(profile->supports_bf16());
  EXPECT_TRUE(profile->supports_fp16());
  EXPECT_THAT(profile->clusters(), IsEmpty());
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("cpuinfo_max_freq")));
  EXPECT_EQ(ClassOf(*profile), "arm64_cpu");
}

TEST(ProbeRaspberryPi5, DeviceTreeModelAndCortexA76NotBcm2835) {
  const auto profile = ProbeTree(HardwareData("raspberry-pi-5"));
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->arch(), "aarch64");
  EXPECT_EQ(profile->cpu_model(), "Raspberry Pi 5 Model B Rev 1.0 (Cortex-A76)");
  EXPECT_THAT(profile->cpu_model(), Not(HasSubstr("BCM2835")));
  EXPECT_THAT(Flags(*profile),
              ElementsAre("asimd", "neon", "asimdhp", "fp16_arith", "asimddp", "dotprod"));
  EXPECT_EQ(profile->n_logical(), 4u);
  EXPECT_EQ(profile->n_physical(), 4u);
  ASSERT_THAT(profile->clusters(), SizeIs(1));
  EXPECT_EQ(profile->clusters(0).max_khz(), 2400000u);
  EXPECT_THAT(Cpus(profile->clusters(0)), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(profile->numa_nodes(), 1u);
  EXPECT_EQ(profile->thermal_zones(), 1u);
  EXPECT_FALSE(profile->supports_bf16());
  EXPECT_EQ(ClassOf(*profile), "arm64_cpu");
}

TEST(ProbeNvidiaJetsonAgxOrin, TegraMarkersMakeAUnifiedMemoryJetson) {
  const auto profile = ProbeTree(HardwareData("nvidia-jetson-agx-orin"));
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->arch(), "aarch64");
  EXPECT_EQ(profile->cpu_model(), "NVIDIA Orin Jetson-Small Developer Kit (Cortex-A78AE)");
  EXPECT_EQ(profile->n_logical(), 12u);
  EXPECT_EQ(profile->n_physical(), 12u);
  // Three cpufreq policies with one maximum are one cluster.
  ASSERT_THAT(profile->clusters(), SizeIs(1));
  EXPECT_EQ(profile->clusters(0).max_khz(), 2201600u);
  EXPECT_THAT(Cpus(profile->clusters(0)), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  EXPECT_EQ(profile->accelerator(), "cuda_unified");
  EXPECT_EQ(profile->gpu_name(), "NVIDIA tegra234 integrated GPU");
  EXPECT_EQ(profile->ram_total_bytes(), 30654 * 1024 * kKiB);
  EXPECT_EQ(profile->gpu_mem_bytes(), profile->ram_total_bytes());
  EXPECT_TRUE(profile->supports_bf16());
  EXPECT_TRUE(profile->supports_fp16());
  ASSERT_THAT(profile->accelerators(), SizeIs(1));
  EXPECT_TRUE(profile->accelerators(0).usable());
  EXPECT_EQ(profile->accelerators(0).source(), "/proc/device-tree/compatible");
  EXPECT_EQ(ClassOf(*profile), "jetson");
}

TEST(ProbeSnapdragon8Gen2Phone, ClustersBiggestFirstAndHexagonNpu) {
  // Synthetic tree built from the facts of a real dump (see its README).
  const auto profile = ProbeTree(HardwareData("qualcomm-snapdragon-8gen2-synthetic"));
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->arch(), "aarch64");
  EXPECT_EQ(profile->cpu_model(),
            "3x Cortex-A510 + 2x Cortex-A715 + 2x Cortex-A710 + 1x Cortex-X3");
  EXPECT_THAT(Flags(*profile), ElementsAre("asimd", "neon", "asimdhp", "fp16_arith", "asimddp",
                                           "dotprod", "i8mm", "bf16"));
  EXPECT_EQ(profile->n_logical(), 8u);
  EXPECT_EQ(profile->n_physical(), 8u);
  ASSERT_THAT(profile->clusters(), SizeIs(3));
  EXPECT_EQ(profile->clusters(0).max_khz(), 3187200u);
  EXPECT_THAT(Cpus(profile->clusters(0)), ElementsAre(7));
  EXPECT_EQ(profile->clusters(1).max_khz(), 2803200u);
  EXPECT_THAT(Cpus(profile->clusters(1)), ElementsAre(3, 4, 5, 6));
  EXPECT_EQ(profile->clusters(2).max_khz(), 2016000u);
  EXPECT_THAT(Cpus(profile->clusters(2)), ElementsAre(0, 1, 2));
  EXPECT_EQ(profile->host_os(), "android");
  EXPECT_EQ(profile->accelerator(), "npu:qualcomm");
  ASSERT_THAT(profile->accelerators(), SizeIs(1));
  const v1::AcceleratorInfo& npu = profile->accelerators(0);
  EXPECT_EQ(npu.kind(), "npu");
  EXPECT_EQ(npu.vendor(), "qualcomm");
  EXPECT_EQ(npu.name(), "Qualcomm Hexagon NPU (Snapdragon SM8550, soc_id 519)");
  EXPECT_EQ(npu.route(), "/dev/adsprpc-smd");
  EXPECT_TRUE(npu.usable());
  EXPECT_EQ(ClassOf(*profile), "npu_phone");
}

TEST(ProbeWsl2, MicrosoftKernelIsWsl2) {
  const auto profile = ProbeTree(HardwareData("wsl2-synthetic"));
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->host_os(), "wsl2");
  EXPECT_EQ(profile->n_logical(), 4u);
  EXPECT_EQ(profile->n_physical(), 2u);  // two SMT pairs in cpuinfo's core ids
  EXPECT_EQ(ClassOf(*profile), "x86_cpu");
}

TEST(ProbeContainerCpuQuota, ReportsWhatTheCgroupAllowsNotTheHost) {
  const auto profile = ProbeTree(HardwareData("container-cpu-quota-synthetic"));
  ASSERT_THAT(profile, IsOk());
  // The pod's quota of 1.5 CPUs binds its container; rounded up to 2.
  EXPECT_EQ(profile->n_logical(), 2u);
  EXPECT_EQ(profile->n_physical(), 2u);
  EXPECT_EQ(profile->ram_total_bytes(), 2 * kGiB);
  EXPECT_EQ(profile->ram_available_bytes(), 2 * kGiB);
  EXPECT_THAT(Notes(*profile),
              Contains(AllOf(HasSubstr("/sys/fs/cgroup/kubepods.slice/pod-a/cpu.max"),
                             HasSubstr("allows 2 of 8"))));
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("container-b/memory.max allows 2147483648")));
}

TEST(ProbeIntelMeteorLakeNpuUnbound, NpuPresentButUnusableWithTheReason) {
  const auto profile = ProbeTree(HardwareData("intel-meteor-lake-npu-unbound-synthetic"));
  ASSERT_THAT(profile, IsOk());
  ASSERT_THAT(profile->accelerators(), SizeIs(2));
  const v1::AcceleratorInfo& igpu = profile->accelerators(0);
  EXPECT_EQ(igpu.kind(), "gpu");
  EXPECT_EQ(igpu.vendor(), "intel");
  EXPECT_EQ(igpu.driver(), "i915");
  EXPECT_EQ(igpu.route(), "/dev/dri/renderD128");
  EXPECT_TRUE(igpu.usable());
  const v1::AcceleratorInfo& npu = profile->accelerators(1);
  EXPECT_EQ(npu.kind(), "npu");
  EXPECT_EQ(npu.name(), "Intel NPU (Meteor Lake)");
  EXPECT_FALSE(npu.usable());
  EXPECT_THAT(npu.reason(), AllOf(HasSubstr("0000:00:0b.0"), HasSubstr("no kernel driver bound"),
                                  HasSubstr("intel_vpu")));
  // A laptop NPU does not make the device a phone.
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_EQ(ClassOf(*profile), "x86_cpu");
}

TEST(ProbeAmdStrixNpuBound, AccelNodeListedOnceAndUsable) {
  const auto profile = ProbeTree(HardwareData("amd-strix-npu-bound-synthetic"));
  ASSERT_THAT(profile, IsOk());
  ASSERT_THAT(profile->accelerators(), SizeIs(1));
  const v1::AcceleratorInfo& npu = profile->accelerators(0);
  EXPECT_EQ(npu.name(), "AMD XDNA 2 NPU (Strix)");
  EXPECT_EQ(npu.vendor(), "amd");
  EXPECT_EQ(npu.driver(), "amdxdna");
  EXPECT_EQ(npu.source(), "/dev/accel/accel0");
  EXPECT_TRUE(npu.usable());
  EXPECT_EQ(ClassOf(*profile), "x86_cpu");
}

TEST(ProbeLiveMachine, ThisMachineYieldsAPlausibleProfile) {
  const auto filesystem = MakeRootedFilesystem("/");
  ProbeEnvironment environment = LiveProbeEnvironment(*filesystem);
  environment.environment_variables.clear();  // probe, whatever the CI sets
  const auto profile = ProbeHardware(environment);
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->source(), "probe");
  EXPECT_FALSE(profile->arch().empty());
  EXPECT_GE(profile->n_logical(), 1u);
  EXPECT_GE(profile->n_physical(), 1u);
  EXPECT_GT(profile->ram_total_bytes(), 0u);
  EXPECT_FALSE(profile->accelerator().empty());
  EXPECT_FALSE(profile->host_os().empty());
}

TEST(ProbeLiveMachine, KernelRefusesTheAmxTileStateOnACpuWithoutAmx) {
  const auto filesystem = MakeRootedFilesystem("/");
  const auto cpuinfo = filesystem->ReadFile("/proc/cpuinfo");
  ASSERT_THAT(cpuinfo, IsOk());
  if (cpuinfo->find("amx_tile") != std::string::npos) {
    GTEST_SKIP() << "this CPU has AMX; the refusal path is covered by injection above";
  }
  const AmxPermission permission = RequestAmxPermissionFromKernel();
  EXPECT_EQ(permission.answer, AmxPermission::Answer::kRefused);
  EXPECT_FALSE(permission.detail.empty());
}

TEST(ProbeLiveMachine, AffinityCountIsWithinTheConfiguredCpus) {
  const std::optional<uint32_t> allowed = AllowedCpuCountFromKernel();
  ASSERT_TRUE(allowed.has_value());
  EXPECT_GE(*allowed, 1u);
  EXPECT_LE(*allowed, static_cast<uint32_t>(get_nprocs_conf()));
}

}  // namespace
}  // namespace weightpath::probe
