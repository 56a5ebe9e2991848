#include "policy/hardware_class.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::policy {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::StatusIs;

v1::HardwareProfile Profile(const std::string& arch, const std::string& accelerator) {
  v1::HardwareProfile profile;
  profile.set_arch(arch);
  profile.set_accelerator(accelerator);
  return profile;
}

TEST(PolicyHardwareClassTest, AcceleratorDecidesBeforeArch) {
  EXPECT_EQ(*ClassifyHardware(Profile("aarch64", "npu:qualcomm")), HardwareClass::kNpuPhone);
  EXPECT_EQ(*ClassifyHardware(Profile("riscv64", "npu")), HardwareClass::kNpuPhone);
  EXPECT_EQ(*ClassifyHardware(Profile("aarch64", "cuda_unified")), HardwareClass::kJetson);
  EXPECT_EQ(*ClassifyHardware(Profile("x86_64", "cuda_discrete")), HardwareClass::kCudaDiscrete);
}

TEST(PolicyHardwareClassTest, CpuClassesComeFromArch) {
  EXPECT_EQ(*ClassifyHardware(Profile("aarch64", "none")), HardwareClass::kArm64Cpu);
  EXPECT_EQ(*ClassifyHardware(Profile("x86_64", "")), HardwareClass::kX86Cpu);
  // An accelerator the rules do not know leaves the CPU in charge.
  EXPECT_EQ(*ClassifyHardware(Profile("x86_64", "rocm")), HardwareClass::kX86Cpu);
}

TEST(PolicyHardwareClassTest, UnknownArchWithoutAcceleratorIsRefused) {
  EXPECT_THAT(ClassifyHardware(Profile("riscv64", "none")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("profile.arch 'riscv64'")));
  EXPECT_THAT(ClassifyHardware(Profile("", "")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("profile.arch ''")));
  EXPECT_THAT(ClassifyHardware(Profile("i686", "none")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("profile.arch")));
}

TEST(PolicyHardwareClassTest, NamesRoundTrip) {
  for (HardwareClass hardware_class : kAllHardwareClasses) {
    EXPECT_EQ(*ParseHardwareClass(HardwareClassName(hardware_class)), hardware_class);
  }
  EXPECT_THAT(ParseHardwareClass("gpu"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'gpu'")));
}

TEST(PolicyHardwareClassTest, AmxNeedsX86AndATileFlag) {
  v1::HardwareProfile profile = Profile("x86_64", "none");
  EXPECT_FALSE(HasAmx(profile));
  profile.add_cpu_flags("amx_int8");
  EXPECT_FALSE(HasAmx(profile));
  profile.add_cpu_flags("amx_bf16");
  EXPECT_TRUE(HasAmx(profile));
  profile.set_arch("aarch64");
  EXPECT_FALSE(HasAmx(profile));
  v1::HardwareProfile tile_only = Profile("x86_64", "none");
  tile_only.add_cpu_flags("amx_tile");
  EXPECT_TRUE(HasAmx(tile_only));
}

}  // namespace
}  // namespace weightpath::policy
