// One suite per real machine the probe has met, through the fake NVIDIA
// libraries (fake_nvidia/fake_machines.h holds each machine's figures): the
// lent H200, a DGX-style 8xH100, an A100 with two 3g.40gb MIG slices, a
// Jetson AGX Orin on L4T R36 (no NVML) and an RTX 4090 with 90% of its
// memory in use. The engine's CUDA_VISIBLE_DEVICES is applied as the driver
// applies it.
#include <filesystem>
#include <string>

#include "agent/probe/probe.h"
#include "agent/probe/profile_text.h"
#include "google/protobuf/util/message_differencer.h"
#include "policy/profile_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/hardware_class.h"
#include "tests/probe/probe_test_support.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::probe {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::weightpath::testing::IsOk;
using testing::FakeNvidia;
using testing::HardwareData;
using testing::Notes;
using testing::ProbeTree;
using testing::TempTree;

std::string ClassOf(const v1::HardwareProfile& profile) {
  const auto hardware_class = policy::ClassifyHardware(profile);
  if (!hardware_class.ok()) return std::string(hardware_class.status().message());
  return std::string(policy::HardwareClassName(*hardware_class));
}

// The machine's NVML, and a CUDA driver whose cuInit takes 250 ms: the
// probe must not need it while NVML answers.
absl::StatusOr<v1::HardwareProfile> ProbeWith(const std::string& nvml,
                                              std::optional<std::string> visible_devices = {},
                                              const std::string& tree = "intel-sapphire-rapids") {
  return ProbeTree(HardwareData(tree), [&](ProbeEnvironment& env) {
    env.gpu_libraries.nvml = {FakeNvidia(nvml)};
    env.gpu_libraries.cuda = {FakeNvidia("fake_cuda_h200_slow")};
    if (visible_devices) env.environment_variables[kCudaVisibleDevicesVariable] = *visible_devices;
  });
}

std::vector<bool> UsableGpus(const v1::HardwareProfile& profile) {
  std::vector<bool> usable;
  for (const v1::GpuDevice& gpu : profile.gpus()) usable.push_back(gpu.usable());
  return usable;
}

TEST(ProbeMachineH200, OneGpuFromNvmlWithoutCuInit) {
  const auto profile = ProbeWith("fake_nvml_h200");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_inventory_source(), "nvml");  // cuInit never ran
  EXPECT_EQ(profile->accelerator(), "cuda_discrete");
  EXPECT_EQ(profile->gpu_name(), "NVIDIA H200");
  EXPECT_EQ(profile->gpu_mem_bytes(), 150109716480u);  // 139.8 GiB
  EXPECT_THAT(profile->gpu_capability(), ElementsAre(9, 0));
  EXPECT_EQ(profile->gpu_sm_count(), 132u);
  EXPECT_EQ(profile->gpu_driver_version(), "580.95.05");
  EXPECT_EQ(profile->cuda_driver_version(), "13.0");
  EXPECT_FALSE(profile->has_cuda_visible_devices());
  ASSERT_THAT(profile->gpus(), SizeIs(1));
  const v1::GpuDevice& gpu = profile->gpus(0);
  EXPECT_EQ(gpu.uuid(), "GPU-8e1a6f2c-3b4d-4c5e-9f60-7a8b9c0d1e2f");
  EXPECT_EQ(gpu.pci_bus_id(), "00000000:19:00.0");
  EXPECT_EQ(gpu.memory_free_bytes(), 149557313536u);
  EXPECT_FALSE(gpu.mig_enabled());
  EXPECT_FALSE(gpu.integrated());
  EXPECT_TRUE(gpu.usable());
  EXPECT_EQ(gpu.cuda_ordinal(), 0u);
  EXPECT_TRUE(profile->supports_bf16());
  EXPECT_EQ(ClassOf(*profile), "cuda_discrete");
}

TEST(ProbeMachineH200, EmptyCudaVisibleDevicesLeavesNoUsableGpu) {
  const auto profile = ProbeWith("fake_nvml_h200", "");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_TRUE(profile->gpu_name().empty());
  EXPECT_EQ(profile->gpu_mem_bytes(), 0u);
  EXPECT_EQ(profile->cuda_visible_devices(), "");
  ASSERT_THAT(profile->gpus(), SizeIs(1));  // present...
  EXPECT_FALSE(profile->gpus(0).usable());  // ...and not usable, saying why
  EXPECT_FALSE(profile->gpus(0).has_cuda_ordinal());
  EXPECT_THAT(profile->gpus(0).reason(), HasSubstr("hidden by CUDA_VISIBLE_DEVICES=''"));
  ASSERT_THAT(profile->accelerators(), SizeIs(1));
  EXPECT_FALSE(profile->accelerators(0).usable());
  EXPECT_EQ(ClassOf(*profile), "x86_cpu");
}

TEST(ProbeMachineH200, VisibleDevicesOneNamesNoGpuOfAOneGpuMachine) {
  const auto profile = ProbeWith("fake_nvml_h200", "1");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_THAT(UsableGpus(*profile), ElementsAre(false));
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("entry '1' names no device")));
  EXPECT_EQ(ClassOf(*profile), "x86_cpu");
}

TEST(ProbeMachineH200, FormsTheDriverAcceptsKeepTheGpu) {
  for (const char* value : {"0", " 0 ", "+0", "0abc", "0x0", "GPU-8E1A", "GPU-8", "MIG-8e1a", "0,"}) {
    const auto profile = ProbeWith("fake_nvml_h200", value);
    ASSERT_THAT(profile, IsOk());
    EXPECT_EQ(profile->accelerator(), "cuda_discrete") << value;
  }
}

TEST(ProbeMachineH200, TheSameGpuTwiceMakesTheDriverRefuseEverything) {
  const auto profile = ProbeWith("fake_nvml_h200", "0,0");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_THAT(profile->gpus(0).reason(), HasSubstr("CUDA_ERROR_INVALID_DEVICE"));
}

TEST(ProbeMachineDgxH100, EightGpusEachDescribed) {
  const auto profile = ProbeWith("fake_nvml_dgx_h100");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "cuda_discrete");
  ASSERT_THAT(profile->gpus(), SizeIs(8));
  EXPECT_THAT(profile->accelerators(), SizeIs(8));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(profile->gpus(i).index(), static_cast<uint32_t>(i));
    EXPECT_EQ(profile->gpus(i).cuda_ordinal(), static_cast<uint32_t>(i));
    EXPECT_EQ(profile->gpus(i).sm_count(), 132u);
    EXPECT_EQ(profile->gpus(i).memory_total_bytes(), 85520809984u);
  }
  EXPECT_EQ(profile->gpus(7).pci_bus_id(), "00000000:DB:00.0");
  EXPECT_EQ(profile->gpu_name(), "NVIDIA H100 80GB HBM3");
}

TEST(ProbeMachineDgxH100, VisibleDevicesPickAndOrder) {
  const auto profile = ProbeWith("fake_nvml_dgx_h100", "3,1");
  ASSERT_THAT(profile, IsOk());
  EXPECT_THAT(UsableGpus(*profile),
              ElementsAre(false, true, false, true, false, false, false, false));
  EXPECT_EQ(profile->gpus(3).cuda_ordinal(), 0u);
  EXPECT_EQ(profile->gpus(1).cuda_ordinal(), 1u);
  // An ambiguous UUID prefix ends the list; an unambiguous one selects.
  const auto ambiguous = ProbeWith("fake_nvml_dgx_h100", "2,GPU-6,4");
  ASSERT_THAT(ambiguous, IsOk());
  EXPECT_THAT(UsableGpus(*ambiguous),
              ElementsAre(false, false, true, false, false, false, false, false));
  const auto by_uuid = ProbeWith("fake_nvml_dgx_h100", "GPU-6f,GPU-3c4d5e6f-7a8b");
  ASSERT_THAT(by_uuid, IsOk());
  EXPECT_EQ(by_uuid->gpus(7).cuda_ordinal(), 0u);
  EXPECT_EQ(by_uuid->gpus(3).cuda_ordinal(), 1u);
}

TEST(ProbeMachineA100Mig, EachSliceIsADeviceOfItsOwnSize) {
  const auto profile = ProbeWith("fake_nvml_a100_mig");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "cuda_discrete");
  // Never the parent's 80 GB and 108 SMs.
  EXPECT_EQ(profile->gpu_mem_bytes(), 42144366592u);
  EXPECT_EQ(profile->gpu_sm_count(), 42u);
  EXPECT_EQ(profile->gpu_name(), "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
  ASSERT_THAT(profile->gpus(), SizeIs(1));
  const v1::GpuDevice& gpu = profile->gpus(0);
  EXPECT_TRUE(gpu.mig_enabled());
  EXPECT_FALSE(gpu.usable());
  EXPECT_THAT(gpu.reason(), HasSubstr("its instances are the devices"));
  ASSERT_THAT(gpu.mig_instances(), SizeIs(2));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(gpu.mig_instances(i).profile(), "3g.40gb");
    EXPECT_EQ(gpu.mig_instances(i).memory_total_bytes(), 42144366592u);
    EXPECT_EQ(gpu.mig_instances(i).sm_count(), 42u);
    EXPECT_EQ(gpu.mig_instances(i).gpu_instance_id(), static_cast<uint32_t>(i + 1));
    EXPECT_TRUE(gpu.mig_instances(i).usable());
    EXPECT_EQ(gpu.mig_instances(i).cuda_ordinal(), static_cast<uint32_t>(i));
  }
  EXPECT_EQ(gpu.mig_instances(1).memory_free_bytes(), 30000000000u);
  EXPECT_THAT(profile->accelerators(), SizeIs(2));
}

TEST(ProbeMachineA100Mig, ProfileJsonCarriesEveryGpuAndSliceBack) {
  // `probe -o json` written to WEIGHTPATH_HW_PROFILE (or weightpathctl's
  // --profile) must give the same GPUs back.
  auto profile = ProbeWith("fake_nvml_a100_mig", "MIG-c0ffee");
  ASSERT_THAT(profile, IsOk());
  const auto json = ProfileJson(*profile);
  ASSERT_THAT(json, IsOk());
  auto parsed = policy::ParseProfileJson(*json, "probe.json");
  ASSERT_THAT(parsed, IsOk());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*parsed, *profile))
      << parsed->DebugString();
  EXPECT_THAT(*json, HasSubstr("\"memory_total_bytes\": 42144366592"));
}

TEST(ProbeMachineA100Mig, VisibleDevicesNameASliceNotTheParent) {
  const auto slice = ProbeWith("fake_nvml_a100_mig", "MIG-d00d");
  ASSERT_THAT(slice, IsOk());
  EXPECT_FALSE(slice->gpus(0).mig_instances(0).usable());
  EXPECT_TRUE(slice->gpus(0).mig_instances(1).usable());
  EXPECT_EQ(slice->gpus(0).mig_instances(1).cuda_ordinal(), 0u);
  const auto legacy =
      ProbeWith("fake_nvml_a100_mig", "MIG-GPU-a1000000-1111-4222-8333-444455556666/1/0");
  ASSERT_THAT(legacy, IsOk());
  EXPECT_TRUE(legacy->gpus(0).mig_instances(0).usable());
  EXPECT_FALSE(legacy->gpus(0).mig_instances(1).usable());
  // A MIG-enabled GPU is no CUDA device by itself.
  const auto parent = ProbeWith("fake_nvml_a100_mig", "GPU-a100");
  ASSERT_THAT(parent, IsOk());
  EXPECT_EQ(parent->accelerator(), "none");
}

TEST(ProbeMachineRtx4090Busy, FreeMemoryIsReportedBesideTheTotal) {
  const auto profile = ProbeWith("fake_nvml_rtx4090", std::nullopt, "amd-zen4-epyc-9654");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "cuda_discrete");
  EXPECT_EQ(profile->gpu_mem_bytes(), 25757220864u);
  EXPECT_THAT(profile->gpu_capability(), ElementsAre(8, 9));
  EXPECT_EQ(profile->gpu_sm_count(), 128u);
  ASSERT_THAT(profile->gpus(), SizeIs(1));
  EXPECT_EQ(profile->gpus(0).memory_total_bytes(), 25757220864u);
  EXPECT_EQ(profile->gpus(0).memory_free_bytes(), 2575722086u);  // 90% in use
  EXPECT_THAT(profile->accelerators(0).reason(), HasSubstr("8.9 (bf16 capable)"));
}

// The captured AGX Orin tree, its release file saying L4T R36.4.3.
class ProbeMachineJetsonOrinR36 : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::copy(HardwareData("nvidia-jetson-agx-orin"), tree_.root(),
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::copy_symlinks);
    std::filesystem::remove(tree_.root() + "/etc/nv_tegra_release");
    tree_.Write("/etc/nv_tegra_release",
                "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, "
                "DATE: Wed Jan  8 01:49:37 UTC 2025\n");
  }
  absl::StatusOr<v1::HardwareProfile> Probe(std::optional<std::string> visible_devices = {},
                                            bool with_cuda = true) {
    return ProbeTree(tree_.root(), [&](ProbeEnvironment& env) {
      env.gpu_libraries.nvml = {"/nonexistent/libnvidia-ml.so.1"};  // none on Jetson
      if (with_cuda) env.gpu_libraries.cuda = {FakeNvidia("fake_cuda_orin")};
      if (visible_devices) env.environment_variables[kCudaVisibleDevicesVariable] = *visible_devices;
    });
  }
  TempTree tree_;
};

TEST_F(ProbeMachineJetsonOrinR36, CudaDescribesTheIntegratedGpuAndL4tIsRead) {
  const auto profile = Probe();
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_inventory_source(), "cuda");
  EXPECT_EQ(profile->accelerator(), "cuda_unified");
  EXPECT_EQ(profile->l4t_release(), "36.4.3");
  EXPECT_EQ(profile->l4t_major(), 36u);
  EXPECT_THAT(profile->gpu_capability(), ElementsAre(8, 7));
  EXPECT_EQ(profile->gpu_sm_count(), 16u);
  EXPECT_EQ(profile->gpu_mem_bytes(), profile->ram_total_bytes());
  ASSERT_THAT(profile->gpus(), SizeIs(1));
  EXPECT_TRUE(profile->gpus(0).integrated());
  EXPECT_EQ(ClassOf(*profile), "jetson");
}

TEST_F(ProbeMachineJetsonOrinR36, HiddenByTheEngineEnvironment) {
  // The captured tree alone (no driver asked): "" and "1" show nothing of a
  // one-GPU machine, "0" shows it.
  for (const char* value : {"", "1"}) {
    const auto profile = Probe(value, /*with_cuda=*/false);
    ASSERT_THAT(profile, IsOk());
    EXPECT_EQ(profile->accelerator(), "none") << value;
    ASSERT_THAT(profile->accelerators(), Contains(::testing::Property(
                                             &v1::AcceleratorInfo::usable, false)));
  }
  const auto shown = Probe("0", /*with_cuda=*/false);
  ASSERT_THAT(shown, IsOk());
  EXPECT_EQ(shown->accelerator(), "cuda_unified");
}

TEST(ProbeMachineH200NoNvml, FailingNvmlFallsBackToCuInit) {
  const auto profile = ProbeWith("fake_nvml_driver_not_loaded");
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_inventory_source(), "cuda");
  EXPECT_EQ(profile->gpu_name(), "NVIDIA H200");
  EXPECT_EQ(profile->gpu_sm_count(), 132u);
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("nvmlInit_v2 failed with nvmlReturn 9")));
  EXPECT_THAT(UsableGpus(*profile), ElementsAre(true));
}

}  // namespace
}  // namespace weightpath::probe
