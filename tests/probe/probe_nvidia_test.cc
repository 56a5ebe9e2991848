// NVIDIA GPUs through the driver libraries. No NVIDIA GPU exists on the test
// machines, so these load small fake libnvidia-ml / libcuda builds (see
// fake_nvidia/) through the probe's real dlopen path; the host CPU trees are
// real captures.
#include <string>

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
using testing::HardwareData;
using testing::Notes;
using testing::ProbeTree;

std::string ClassOf(const v1::HardwareProfile& profile) {
  const auto hardware_class = policy::ClassifyHardware(profile);
  if (!hardware_class.ok()) return std::string(hardware_class.status().message());
  return std::string(policy::HardwareClassName(*hardware_class));
}

TEST(ProbeWorkstationRtx4090, NvmlDescribesADiscreteAmpereOrNewerGpu) {
  const auto profile = ProbeTree(HardwareData("amd-zen4-epyc-9654"), [](ProbeEnvironment& env) {
    env.gpu_libraries.nvml = {FAKE_NVML_RTX4090};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "cuda_discrete");
  EXPECT_EQ(profile->gpu_name(), "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(profile->gpu_mem_bytes(), 25757220864u);
  EXPECT_THAT(profile->gpu_capability(), ElementsAre(8, 9));
  EXPECT_EQ(profile->gpu_sm_count(), 0u);  // NVML does not report SMs
  EXPECT_TRUE(profile->supports_bf16());
  EXPECT_TRUE(profile->supports_fp16());
  ASSERT_THAT(profile->accelerators(), SizeIs(1));
  EXPECT_TRUE(profile->accelerators(0).usable());
  EXPECT_EQ(profile->accelerators(0).source(), FAKE_NVML_RTX4090);
  EXPECT_THAT(profile->accelerators(0).reason(), HasSubstr("8.9 (bf16 capable)"));
  EXPECT_EQ(ClassOf(*profile), "cuda_discrete");
}

TEST(ProbeServerTeslaT4, CudaDriverDescribesATuringGpuWithoutBf16) {
  const auto profile = ProbeTree(HardwareData("intel-sapphire-rapids"), [](ProbeEnvironment& env) {
    env.gpu_libraries.cuda = {FAKE_CUDA_T4};
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
  EXPECT_EQ(ClassOf(*profile), "cuda_discrete");
}

TEST(ProbeServerTeslaT4, CudaDriverAnswersBeforeNvml) {
  const auto profile = ProbeTree(HardwareData("intel-sapphire-rapids"), [](ProbeEnvironment& env) {
    env.gpu_libraries.cuda = {FAKE_CUDA_T4};
    env.gpu_libraries.nvml = {FAKE_NVML_RTX4090};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->gpu_name(), "Tesla T4");
  EXPECT_THAT(profile->accelerators(), SizeIs(1));
}

TEST(ProbeGb10IntegratedGpu, CudaIntegratedAttributeMakesCudaUnifiedWithoutTegra) {
  const auto profile = ProbeTree(HardwareData("aws-graviton3"), [](ProbeEnvironment& env) {
    env.gpu_libraries.cuda = {FAKE_CUDA_GB10};
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

TEST(ProbeNoNvidiaDriver, MissingLibrariesMeanNoGpuAndNoError) {
  const auto profile = ProbeTree(HardwareData("amd-zen4-epyc-9654"), [](ProbeEnvironment& env) {
    env.gpu_libraries.cuda = {"/nonexistent/libcuda.so.1"};
    env.gpu_libraries.nvml = {"/nonexistent/libnvidia-ml.so.1"};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_THAT(profile->accelerators(), IsEmpty());
  EXPECT_TRUE(profile->gpu_name().empty());
  EXPECT_EQ(ClassOf(*profile), "x86_cpu");
}

TEST(ProbeNvmlDriverNotLoaded, InitFailureIsANoteAndNoGpu) {
  const auto profile = ProbeTree(HardwareData("amd-zen4-epyc-9654"), [](ProbeEnvironment& env) {
    env.gpu_libraries.nvml = {FAKE_NVML_DRIVER_NOT_LOADED};
  });
  ASSERT_THAT(profile, IsOk());
  EXPECT_EQ(profile->accelerator(), "none");
  EXPECT_THAT(Notes(*profile), Contains(HasSubstr("nvmlInit_v2 failed with nvmlReturn 9")));
}

TEST(ProbeNvidiaLibraryMissingSymbols, ALibraryThatIsNotTheDriverIsANote) {
  // The CUDA fake exports none of NVML's entry points.
  const NvidiaQuery query = QueryWithNvml({FAKE_CUDA_T4});
  EXPECT_THAT(query.gpus, IsEmpty());
  EXPECT_THAT(query.notes, ElementsAre(HasSubstr("does not export nvmlInit_v2")));
}

}  // namespace
}  // namespace weightpath::probe
