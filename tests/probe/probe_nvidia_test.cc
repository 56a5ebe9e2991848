// NVIDIA GPUs through the driver libraries. No NVIDIA GPU exists on the test
// machines, so these load small fake libnvidia-ml / libcuda builds (see
// fake_nvidia/) through the probe's real dlopen path; the host CPU trees are
// real captures. The machines the probe has met are in
// probe_gpu_machines_test.cc.
#include <string>

#include "agent/probe/gpu_visibility.h"
#include "agent/probe/nvidia_gpu.h"
#include "agent/probe/probe.h"
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

std::string ClassOf(const v1::HardwareProfile& profile) {
  const auto hardware_class = policy::ClassifyHardware(profile);
  if (!hardware_class.ok()) return std::string(hardware_class.status().message());
  return std::string(policy::HardwareClassName(*hardware_class));
}

TEST(ProbeServerTeslaT4, CudaDriverDescribesATuringGpuWithoutBf16) {
  const auto profile = ProbeTree(HardwareData("intel-sapphire-rapids"), [](ProbeEnvironment& env) {
    env.gpu_libraries.cuda = {FakeNvidia("fake_cuda_t4")};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "cuda_discrete");
  EXPECT_EQ(profile->gpu_name(), "Tesla T4");
  EXPECT_EQ(profile->gpu_mem_bytes(), 15843721216u);
  EXPECT_THAT(profile->gpu_capability(), ElementsAre(7, 5));
  EXPECT_EQ(profile->gpu_sm_count(), 40u);
  // The GPU's precision replaces the CPU's (which has avx512_bf16).
  EXPECT_FALSE(profile->supports_bf16());
  EXPECT_TRUE(profile->supports_fp16());
  EXPECT_THAT(profile->accelerators(0).reason(), HasSubstr("bf16 needs 8.0"));
  EXPECT_EQ(profile->gpu_inventory_source(), "cuda");
  ASSERT_THAT(profile->gpus(), SizeIs(1));
  EXPECT_EQ(profile->gpus(0).uuid(), "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
  EXPECT_EQ(profile->gpus(0).pci_bus_id(), "00000000:00:1E.0");
  EXPECT_FALSE(profile->gpus(0).has_memory_free_bytes());  // CUDA needs a context for that
  EXPECT_EQ(profile->cuda_driver_version(), "13.0");
  EXPECT_EQ(ClassOf(*profile), "cuda_discrete");
}

TEST(ProbeServerTeslaT4, NvmlAnswersBeforeCuda) {
  const auto profile = ProbeTree(HardwareData("intel-sapphire-rapids"), [](ProbeEnvironment& env) {
    env.gpu_libraries.cuda = {FakeNvidia("fake_cuda_t4")};
    env.gpu_libraries.nvml = {FakeNvidia("fake_nvml_rtx4090")};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_name(), "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(profile->gpu_inventory_source(), "nvml");
  EXPECT_THAT(profile->accelerators(), SizeIs(1));
}

TEST(ProbeGb10IntegratedGpu, CudaIntegratedAttributeMakesCudaUnifiedWithoutTegra) {
  const auto profile = ProbeTree(HardwareData("aws-graviton3"), [](ProbeEnvironment& env) {
    env.gpu_libraries.cuda = {FakeNvidia("fake_cuda_gb10")};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "cuda_unified");
  EXPECT_EQ(profile->gpu_name(), "NVIDIA GB10");
  EXPECT_THAT(profile->gpu_capability(), ElementsAre(12, 1));
  EXPECT_EQ(profile->gpu_sm_count(), 48u);
  // Unified memory: the GPU's memory is the RAM this process may use.
  EXPECT_EQ(profile->gpu_mem_bytes(), profile->ram_total_bytes());
  EXPECT_TRUE(profile->supports_bf16());
  EXPECT_THAT(profile->accelerators(0).reason(), HasSubstr("integrated"));
  EXPECT_EQ(ClassOf(*profile), "jetson");
}

TEST(ProbeGb10IntegratedGpu, NvmlWithoutMemoryFiguresFallsBackToCuda) {
  const auto profile = ProbeTree(HardwareData("aws-graviton3"), [](ProbeEnvironment& env) {
    env.gpu_libraries.nvml = {FakeNvidia("fake_nvml_gb10")};
    env.gpu_libraries.cuda = {FakeNvidia("fake_cuda_gb10")};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_inventory_source(), "cuda");
  EXPECT_EQ(profile->accelerator(), "cuda_unified");
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("NVML device 0 could not be described")));
  // What NVML did read stays.
  EXPECT_EQ(profile->gpu_driver_version(), "580.95.05");
}

TEST(ProbeNoNvidiaDriver, MissingLibrariesMeanNoGpuAndNoError) {
  const auto profile = ProbeTree(HardwareData("amd-zen4-epyc-9654"), [](ProbeEnvironment& env) {
    env.gpu_libraries.cuda = {"/nonexistent/libcuda.so.1"};
    env.gpu_libraries.nvml = {"/nonexistent/libnvidia-ml.so.1"};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_THAT(profile->accelerators(), IsEmpty());
  EXPECT_THAT(profile->gpus(), IsEmpty());
  EXPECT_TRUE(profile->gpu_name().empty());
  EXPECT_TRUE(profile->gpu_inventory_source().empty());
  EXPECT_EQ(ClassOf(*profile), "x86_cpu");
}

TEST(ProbeNvmlDriverNotLoaded, InitFailureIsANoteAndNoGpu) {
  const auto profile = ProbeTree(HardwareData("amd-zen4-epyc-9654"), [](ProbeEnvironment& env) {
    env.gpu_libraries.nvml = {FakeNvidia("fake_nvml_driver_not_loaded")};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("nvmlInit_v2 failed with nvmlReturn 9")));
}

TEST(ProbeNvidiaLibraryMissingSymbols, ALibraryThatIsNotTheDriverIsANote) {
  // The CUDA fake exports none of NVML's entry points.
  const NvidiaQuery query = QueryWithNvml({FakeNvidia("fake_cuda_t4")});
  EXPECT_THAT(query.gpus, IsEmpty());
  EXPECT_THAT(query.notes, ElementsAre(HasSubstr("does not export nvmlInit_v2")));
}

TEST(ProbeNvidiaFigures, SmCountFromCoresPerArchitecture) {
  EXPECT_EQ(SmCountFromCudaCores(16896, 9, 0), 132u);  // H100 / H200
  EXPECT_EQ(SmCountFromCudaCores(6912, 8, 0), 108u);   // A100
  EXPECT_EQ(SmCountFromCudaCores(16384, 8, 9), 128u);  // RTX 4090
  EXPECT_EQ(SmCountFromCudaCores(2560, 7, 5), 40u);    // T4
  EXPECT_EQ(SmCountFromCudaCores(1000, 6, 1), 0u);     // a table it does not know
  EXPECT_EQ(SmCountFromCudaCores(100, 9, 0), 0u);      // not a whole number of SMs
  EXPECT_EQ(CudaVersionText(13000), "13.0");
  EXPECT_EQ(CudaVersionText(12040), "12.4");
  EXPECT_EQ(MigProfileFromName("NVIDIA A100-SXM4-80GB MIG 3g.40gb"), "3g.40gb");
  EXPECT_EQ(MigProfileFromName("NVIDIA H200"), "");
}

// CUDA_VISIBLE_DEVICES on its own, against a list like NVML's.
std::vector<NvidiaGpu> TwoGpus() {
  NvidiaGpu a;
  a.uuid = "GPU-ab12";
  a.capability_major = 9;
  NvidiaGpu b = a;
  b.uuid = "GPU-ab34";
  b.index = 1;
  return {a, b};
}

std::vector<size_t> Visible(const std::optional<std::string>& value) {
  std::vector<size_t> gpus;
  for (const CudaDeviceRef& ref : ResolveCudaVisibleDevices(TwoGpus(), value, std::nullopt).visible) {
    gpus.push_back(ref.gpu);
  }
  return gpus;
}

TEST(ProbeCudaVisibleDevices, ReadLikeTheDriver) {
  EXPECT_THAT(Visible(std::nullopt), ElementsAre(0, 1));
  EXPECT_THAT(Visible(""), IsEmpty());
  EXPECT_THAT(Visible("1,0"), ElementsAre(1, 0));
  EXPECT_THAT(Visible(" 1 "), ElementsAre(1));
  EXPECT_THAT(Visible("+1"), ElementsAre(1));
  EXPECT_THAT(Visible("0abc"), ElementsAre(0));
  EXPECT_THAT(Visible("0x1"), ElementsAre(0));
  EXPECT_THAT(Visible("0,-1,1"), ElementsAre(0));   // an invalid entry ends the list
  EXPECT_THAT(Visible("0,,1"), ElementsAre(0));     // so does an empty one
  EXPECT_THAT(Visible("0,2,1"), ElementsAre(0));    // and one out of range
  EXPECT_THAT(Visible("GPU-AB3"), ElementsAre(1));  // hex case-insensitive
  EXPECT_THAT(Visible("GPU-ab"), IsEmpty());        // ambiguous
  EXPECT_THAT(Visible("MIG-ab1"), ElementsAre(0));  // MIG- takes a plain GPU's prefix too
  EXPECT_THAT(Visible("GPU-"), IsEmpty());
  EXPECT_THAT(Visible("nonsense,0"), IsEmpty());
  const GpuVisibility twice = ResolveCudaVisibleDevices(TwoGpus(), "1,GPU-ab3", std::nullopt);
  EXPECT_THAT(twice.visible, IsEmpty());
  EXPECT_THAT(twice.refused, HasSubstr("same device twice"));
}

TEST(ProbeCudaVisibleDevices, HostileValueIsBoundedAndEscapedInNotes) {
  const std::string value = "\x1b[31m" + std::string(100000, 'x');
  const GpuVisibility visibility = ResolveCudaVisibleDevices(TwoGpus(), value, std::nullopt);
  EXPECT_THAT(visibility.visible, IsEmpty());
  ASSERT_THAT(visibility.notes, SizeIs(1));
  EXPECT_LT(visibility.notes[0].size(), 400u);
  EXPECT_THAT(visibility.notes[0], ::testing::Not(HasSubstr("\x1b")));
}

TEST(ProbeCudaVisibleDevices, FastestFirstIsEstimatedWhenGpusDiffer) {
  std::vector<NvidiaGpu> gpus = TwoGpus();
  gpus[0].capability_major = 7;  // a T4 at PCI index 0, an H100 at 1
  const GpuVisibility fastest = ResolveCudaVisibleDevices(gpus, "0", std::nullopt);
  ASSERT_THAT(fastest.visible, SizeIs(1));
  EXPECT_EQ(fastest.visible[0].gpu, 1u);
  EXPECT_THAT(fastest.notes, Contains(HasSubstr("CUDA_DEVICE_ORDER=PCI_BUS_ID")));
  const GpuVisibility pci = ResolveCudaVisibleDevices(gpus, "0", "PCI_BUS_ID");
  ASSERT_THAT(pci.visible, SizeIs(1));
  EXPECT_EQ(pci.visible[0].gpu, 0u);
  EXPECT_THAT(pci.notes, IsEmpty());
}

}  // namespace
}  // namespace weightpath::probe
