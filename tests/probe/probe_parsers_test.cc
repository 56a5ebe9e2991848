// The pure parsers, one rule per test, on small texts written inline.
#include <limits>
#include <string>
#include <vector>

#include "agent/probe/arm_core_names.h"
#include "agent/probe/cgroup_limits.h"
#include "agent/probe/cpu_flags.h"
#include "agent/probe/cpu_model_name.h"
#include "agent/probe/cpu_topology.h"
#include "agent/probe/cpuinfo.h"
#include "agent/probe/host_os.h"
#include "agent/probe/meminfo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::probe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

TEST(ProbeCpuInfo, ReadsX86StanzasWithTopologyIds) {
  const auto cpuinfo = ParseCpuInfo(
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Example Xeon\n"
      "physical id\t: 1\ncore id\t\t: 7\nflags\t\t: fpu avx2 avx512f\n\n"
      "processor\t: 1\nmodel name\t: Example Xeon\nflags\t\t: fpu avx2\n");
  ASSERT_THAT(cpuinfo, IsOk());
  EXPECT_EQ(cpuinfo->arch_hint, "x86_64");
  EXPECT_FALSE(cpuinfo->flags_are_arm);
  ASSERT_EQ(cpuinfo->processors.size(), 2u);
  EXPECT_EQ(cpuinfo->processors[0].model_name, "Example Xeon");
  EXPECT_EQ(cpuinfo->processors[0].physical_id, 1u);
  EXPECT_EQ(cpuinfo->processors[0].core_id, 7u);
  EXPECT_THAT(cpuinfo->processors[0].flags, ElementsAre("fpu", "avx2", "avx512f"));
  // A flag only one CPU shows is not one every thread can use.
  EXPECT_THAT(CommonRawFlags(*cpuinfo), ElementsAre("fpu", "avx2"));
}

TEST(ProbeCpuInfo, ReadsArmPartNumbersAndTrailerLines) {
  const auto cpuinfo = ParseCpuInfo(
      "processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
      "CPU part\t: 0xd0b\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 5 Model B Rev 1.0");
  ASSERT_THAT(cpuinfo, IsOk());
  EXPECT_EQ(cpuinfo->arch_hint, "aarch64");
  EXPECT_TRUE(cpuinfo->flags_are_arm);
  EXPECT_EQ(cpuinfo->processors[0].arm_implementer, 0x41u);
  EXPECT_EQ(cpuinfo->processors[0].arm_part, 0xd0bu);
  EXPECT_EQ(cpuinfo->hardware, "BCM2835");
  EXPECT_EQ(cpuinfo->board_model, "Raspberry Pi 5 Model B Rev 1.0");
}

TEST(ProbeCpuInfo, RejectsMalformedPartNamingTheField) {
  EXPECT_THAT(ParseCpuInfo("processor : 0\nCPU part : zz\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'CPU part'")));
}

TEST(ProbeCpuInfo, RejectsMalformedProcessorNumber) {
  EXPECT_THAT(ParseCpuInfo("processor : first\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'processor'")));
}

TEST(ProbeCpuInfo, RejectsTextWithoutAnyProcessor) {
  EXPECT_THAT(ParseCpuInfo("MemTotal: 1 kB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no 'processor' line")));
}

TEST(ProbeCpuFlags, X86KeepsRawNamesAndAddsAvx512Alias) {
  EXPECT_THAT(NormaliseCpuFlags({"fpu", "avx512f", "avx2", "amx_tile", "avx512_fp16", "fma"},
                                /*arm=*/false),
              ElementsAre("avx2", "avx512f", "avx512", "amx_tile", "fma"));
}

TEST(ProbeCpuFlags, ArmAddsNeonFp16ArithAndDotprodAliases) {
  EXPECT_THAT(NormaliseCpuFlags({"fp", "asimd", "asimdhp", "asimddp", "sve", "svebf16", "bf16"},
                                /*arm=*/true),
              ElementsAre("asimd", "neon", "asimdhp", "fp16_arith", "asimddp", "dotprod", "bf16",
                          "sve"));
}

TEST(ProbeCpuFlags, X86SecureMemoryEncryptionIsNotArmSme) {
  EXPECT_THAT(NormaliseCpuFlags({"sme", "sev", "avx2"}, /*arm=*/false), ElementsAre("avx2"));
  EXPECT_THAT(NormaliseCpuFlags({"sme"}, /*arm=*/true), ElementsAre("sme"));
}

TEST(ProbeCpuFlags, PrecisionSupportFollowsFlags) {
  EXPECT_TRUE(CpuFlagsSupportBf16({"avx512_bf16"}));
  EXPECT_TRUE(CpuFlagsSupportBf16({"amx_bf16"}));
  EXPECT_TRUE(CpuFlagsSupportBf16({"bf16"}));
  EXPECT_FALSE(CpuFlagsSupportBf16({"avx2", "f16c"}));
  EXPECT_TRUE(CpuFlagsSupportFp16({"f16c"}));
  EXPECT_TRUE(CpuFlagsSupportFp16({"fp16_arith"}));
  EXPECT_FALSE(CpuFlagsSupportFp16({"neon"}));
}

TEST(ProbeCpuFlags, DropAmxRemovesOnlyAmxFlags) {
  std::vector<std::string> flags = {"avx2", "amx_bf16", "amx_tile", "amx_int8", "fma"};
  EXPECT_TRUE(DropAmxFlags(&flags));
  EXPECT_THAT(flags, ElementsAre("avx2", "fma"));
  EXPECT_FALSE(DropAmxFlags(&flags));
}

TEST(ProbeArmCoreNames, NamesKnownPartsAndSpellsOutUnknownOnes) {
  EXPECT_EQ(ArmCoreName(0x41, 0xd40), "Neoverse-V1");
  EXPECT_EQ(ArmCoreName(0x41, 0xd0b), "Cortex-A76");
  EXPECT_EQ(ArmCoreName(0x4e, 0x004), "NVIDIA Carmel");
  EXPECT_EQ(ArmCoreName(0x41, 0xfff), std::nullopt);
  EXPECT_EQ(ArmCoreNameOrIds(0x41, 0xfff), "ARM implementer 0x41 part 0xfff");
}

TEST(ProbeCpuModelName, PiBoardFromCpuinfoModelLineWhenNoDeviceTree) {
  const auto cpuinfo = ParseCpuInfo(
      "processor : 0\nFeatures : asimd\nCPU implementer : 0x41\nCPU part : 0xd0b\n\n"
      "Hardware : BCM2835\nModel : Raspberry Pi 5 Model B Rev 1.0\n");
  ASSERT_THAT(cpuinfo, IsOk());
  EXPECT_EQ(CpuModelName(*cpuinfo, ""), "Raspberry Pi 5 Model B Rev 1.0 (Cortex-A76)");
  EXPECT_EQ(CpuModelName(*cpuinfo, "Other Board"), "Other Board (Cortex-A76)");
}

TEST(ProbeCpuModelName, MixedCoresListedWithCountsInCpuinfoOrder) {
  const auto cpuinfo = ParseCpuInfo(
      "processor : 0\nFeatures : asimd\nCPU implementer : 0x41\nCPU part : 0xd46\n\n"
      "processor : 1\nFeatures : asimd\nCPU implementer : 0x41\nCPU part : 0xd46\n\n"
      "processor : 2\nFeatures : asimd\nCPU implementer : 0x41\nCPU part : 0xd4e\n");
  ASSERT_THAT(cpuinfo, IsOk());
  EXPECT_EQ(CpuModelName(*cpuinfo, ""), "2x Cortex-A510 + 1x Cortex-X3");
}

TEST(ProbeMemInfo, ConvertsKilobytesToBytes) {
  const auto meminfo = ParseMemInfo("MemTotal:  2048 kB\nMemFree: 10 kB\nMemAvailable:  1024 kB\n");
  ASSERT_THAT(meminfo, IsOk());
  EXPECT_EQ(meminfo->total_bytes, 2048u * 1024u);
  EXPECT_EQ(meminfo->available_bytes, 1024u * 1024u);
}

TEST(ProbeMemInfo, OldKernelWithoutMemAvailable) {
  const auto meminfo = ParseMemInfo("MemTotal: 4 kB\nMemFree: 1 kB\n");
  ASSERT_THAT(meminfo, IsOk());
  EXPECT_EQ(meminfo->available_bytes, std::nullopt);
}

// 2^55 kB is 2^65 bytes: was wrapped around to a RAM size of 0.
TEST(ProbeMemInfo, RejectsSizesPast64Bits) {
  EXPECT_THAT(ParseMemInfo("MemTotal: 36028797018963968 kB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("64 bits")));
  const auto largest = ParseMemInfo("MemTotal: 18014398509481983 kB\n");
  ASSERT_THAT(largest, IsOk());
  EXPECT_EQ(largest->total_bytes, 18014398509481983ull * 1024);
}

TEST(ProbeMemInfo, RejectsMissingTotalAndBadUnits) {
  EXPECT_THAT(ParseMemInfo("MemFree: 1 kB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MemTotal")));
  EXPECT_THAT(ParseMemInfo("MemTotal: 1 MB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'MemTotal'")));
  EXPECT_THAT(ParseMemInfo("MemTotal: 1 kB\nMemAvailable: lots kB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'MemAvailable'")));
}

TEST(ProbeCpuTopology, ClustersGroupByMaxFrequencyValueFastestFirst) {
  // Two policies with one maximum are one cluster; CPU order is ascending.
  const auto clusters = GroupClustersByMaxFrequency(
      {{5, 2803200}, {0, 2016000}, {7, 3187200}, {3, 2803200}, {1, 2016000}});
  ASSERT_EQ(clusters.size(), 3u);
  EXPECT_EQ(clusters[0].max_khz(), 3187200u);
  EXPECT_THAT(clusters[0].cpus(), ElementsAre(7));
  EXPECT_EQ(clusters[1].max_khz(), 2803200u);
  EXPECT_THAT(clusters[1].cpus(), ElementsAre(3, 5));
  EXPECT_THAT(clusters[2].cpus(), ElementsAre(0, 1));
  EXPECT_THAT(GroupClustersByMaxFrequency({}), IsEmpty());
}

TEST(ProbeCpuTopology, PhysicalCoresAreDistinctPackageCorePairs) {
  // SMT siblings share (0,0); core ids restart in package 1.
  EXPECT_EQ(CountPhysicalCores({{0, 0}, {0, 0}, {0, 1}, {1, 0}, {1, 1}}), 4u);
}

TEST(ProbeCgroup, ReadsUnifiedAndV1Membership) {
  const auto membership =
      ParseProcSelfCgroup("4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/user.slice\n");
  ASSERT_THAT(membership, IsOk());
  EXPECT_EQ(membership->unified_path, "/user.slice");
  EXPECT_EQ(membership->controller_paths.at("memory"), "/docker/abc");
  EXPECT_EQ(membership->controller_mounts.at("cpu"), "cpu,cpuacct");
  EXPECT_EQ(membership->controller_mounts.at("cpuacct"), "cpu,cpuacct");
}

TEST(ProbeCgroup, RejectsLineWithoutThreeFields) {
  EXPECT_THAT(ParseProcSelfCgroup("0::/\ngarbage\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2")));
}

TEST(ProbeCgroup, CpuMaxRoundsQuotaUpToWholeCpus) {
  EXPECT_THAT(ParseCpuMax("150000 100000\n"), IsOk());
  EXPECT_EQ(*ParseCpuMax("150000 100000\n"), 2u);
  EXPECT_EQ(*ParseCpuMax("100000 100000"), 1u);
  EXPECT_EQ(*ParseCpuMax("50000 100000"), 1u);
  EXPECT_EQ(*ParseCpuMax("max 100000"), std::nullopt);
}

TEST(ProbeCgroup, CpuMaxRejectsMalformedText) {
  EXPECT_THAT(ParseCpuMax("150000"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cpu.max")));
  EXPECT_THAT(ParseCpuMax("150000 0"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cpu.max")));
  EXPECT_THAT(ParseCpuMax("-5 100000"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cpu.max")));
}

// Quotas past what the arithmetic holds: near INT64_MAX (was signed
// overflow in the rounding) and past 2^32 CPUs (was truncated to 0 CPUs).
TEST(ProbeCgroup, HugeQuotasAreCappedNotWrapped) {
  EXPECT_EQ(*ParseCpuMax("9223372036854775807 100000"), std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(*ParseCpuMax("9223372036854775807 9223372036854775807"), 1u);
  EXPECT_EQ(*ParseCpuMax("4294967296 1"), std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(*ParseCpuMax("4294967295 1"), 4294967295u);
  EXPECT_EQ(*ParseCfsQuota("9223372036854775807", "3"), std::numeric_limits<uint32_t>::max());
}

TEST(ProbeCgroup, CfsQuotaMinusOneIsNoLimit) {
  EXPECT_EQ(*ParseCfsQuota("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(*ParseCfsQuota("250000\n", "100000\n"), 3u);
  EXPECT_THAT(ParseCfsQuota("0", "100000"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cpu.cfs_quota_us")));
  EXPECT_THAT(ParseCfsQuota("100", "x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cpu.cfs_period_us")));
}

TEST(ProbeCgroup, MemoryLimitMaxOrBytes) {
  EXPECT_EQ(*ParseMemoryLimit("max\n"), std::nullopt);
  EXPECT_EQ(*ParseMemoryLimit("2147483648\n"), 2147483648u);
  EXPECT_THAT(ParseMemoryLimit("2G"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("memory limit")));
}

TEST(ProbeHostOs, MicrosoftKernelIsWsl2InAnyCase) {
  EXPECT_EQ(HostOsFromKernel("Linux version 5.15.153.1-microsoft-standard-WSL2", false), "wsl2");
  EXPECT_EQ(HostOsFromKernel("Linux version 4.4.0-19041-Microsoft", false), "wsl2");
  EXPECT_EQ(HostOsFromKernel("Linux version 5.15.0-android14", true), "android");
  EXPECT_EQ(HostOsFromKernel("Linux version 6.1.0", false), "linux");
}

}  // namespace
}  // namespace weightpath::probe
