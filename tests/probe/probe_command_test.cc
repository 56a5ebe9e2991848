// `weightpath-agent probe` as the dispatcher calls it, with its output
// captured.
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "agent/probe/probe.h"
#include "agent/probe/probe_command.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/probe/probe_test_support.h"

namespace weightpath::probe {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::HardwareData;

class ProbeCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    // The command reads the override variables from the process.
    unsetenv(kProfileFileVariable);
    unsetenv(kSeedProfileFileVariable);
  }
  int Run(const std::vector<std::string>& arguments) {
    out_.str("");
    err_.str("");
    return RunProbeCommand(arguments, out_, err_);
  }
  // Lines written to stderr.
  size_t ErrorLines() const {
    const std::vector<std::string> lines = absl::StrSplit(err_.str(), '\n', absl::SkipEmpty());
    return lines.size();
  }
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(ProbeCommand, JsonUsesProtoFieldNamesAndParsesBack) {
  ASSERT_EQ(Run({"probe", "--root", HardwareData("aws-graviton3"), "-o", "json"}), 0)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"cpu_model\""));
  EXPECT_THAT(out_.str(), Not(HasSubstr("\"cpuModel\"")));
  v1::HardwareProfile profile;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out_.str(), &profile).ok());
  EXPECT_EQ(profile.arch(), "aarch64");
  EXPECT_EQ(profile.cpu_model(), "Neoverse-V1");
  EXPECT_EQ(profile.source(), "probe");
  EXPECT_THAT(err_.str(), IsEmpty());
}

TEST_F(ProbeCommand, EqualsFormsOfTheOptions) {
  ASSERT_EQ(Run({"probe", "--root=" + HardwareData("raspberry-pi-5"), "--output=json"}), 0)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("Raspberry Pi 5 Model B Rev 1.0 (Cortex-A76)"));
}

TEST_F(ProbeCommand, TextShowsTheClassAndWhyEachAcceleratorIsUsable) {
  ASSERT_EQ(Run({"probe", "--root", HardwareData("qualcomm-snapdragon-8gen2-synthetic")}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("hardware_class: npu_phone\n"));
  EXPECT_THAT(out_.str(), HasSubstr("clusters:       3187200 kHz [7]; 2803200 kHz [3-6]; "
                                    "2016000 kHz [0-2]\n"));
  EXPECT_THAT(out_.str(),
              HasSubstr("  usable:     npu qualcomm Qualcomm Hexagon NPU (Snapdragon SM8550, "
                        "soc_id 519) -- FastRPC node /dev/adsprpc-smd reaches the Hexagon DSP "
                        "of SM8550\n"));
}

TEST_F(ProbeCommand, TextSaysWhyAnUnboundNpuIsNotUsable) {
  ASSERT_EQ(Run({"probe", "--root", HardwareData("intel-meteor-lake-npu-unbound-synthetic"), "-o",
                 "text"}),
            0);
  EXPECT_THAT(out_.str(), HasSubstr("hardware_class: x86_cpu\n"));
  EXPECT_THAT(out_.str(),
              HasSubstr("  not usable: npu intel Intel NPU (Meteor Lake) -- PCI device "
                        "0000:00:0b.0 has no kernel driver bound (intel_vpu serves it)\n"));
}

TEST_F(ProbeCommand, TextShowsWhyAProfileHasNoClass) {
  testing::TempTree tree;
  tree.Write("/proc/cpuinfo", "processor : 0\nCPU architecture : 7\nFeatures : neon\n");
  ASSERT_EQ(Run({"probe", "--root", tree.root()}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("hardware_class: none ("));
  EXPECT_THAT(out_.str(), HasSubstr("arch"));
}

TEST_F(ProbeCommand, ProfileFileVariableReplacesTheProbe) {
  testing::TempTree tree;
  tree.Write("/profile.json", R"({"arch": "x86_64", "cpu_model": "From file"})");
  setenv(kProfileFileVariable, (tree.root() + "/profile.json").c_str(), 1);
  const int exit_code = Run({"probe", "--root", HardwareData("aws-graviton3"), "-o", "json"});
  unsetenv(kProfileFileVariable);
  ASSERT_EQ(exit_code, 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"cpu_model\": \"From file\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"source\": \"file:" + tree.root() + "/profile.json\""));
}

TEST_F(ProbeCommand, JsonOutputFeedsBackThroughTheProfileVariable) {
  ASSERT_EQ(Run({"probe", "--root", HardwareData("nvidia-jetson-agx-orin"), "-o", "json"}), 0);
  const std::string first = out_.str();
  // 64-bit counts are JSON numbers, as the seed's prober wrote them.
  EXPECT_THAT(first, HasSubstr("\"ram_total_bytes\": 32143048704,"));
  EXPECT_THAT(first, HasSubstr("\"max_khz\": 2201600,"));
  testing::TempTree tree;
  tree.Write("/orin.json", first);
  setenv(kProfileFileVariable, (tree.root() + "/orin.json").c_str(), 1);
  const int exit_code = Run({"probe", "-o", "json"});
  unsetenv(kProfileFileVariable);
  ASSERT_EQ(exit_code, 0) << err_.str();
  v1::HardwareProfile original;
  v1::HardwareProfile reloaded;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(first, &original).ok());
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out_.str(), &reloaded).ok());
  EXPECT_EQ(reloaded.source(), "file:" + tree.root() + "/orin.json");
  reloaded.set_source(original.source());
  EXPECT_EQ(reloaded.SerializeAsString(), original.SerializeAsString());
}

TEST_F(ProbeCommand, UnknownArgumentExitsTwoWithOneLine) {
  EXPECT_EQ(Run({"probe", "--bogus"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("unknown argument '--bogus'"));
  EXPECT_EQ(ErrorLines(), 1u);
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST_F(ProbeCommand, OptionWithoutValueExitsTwo) {
  EXPECT_EQ(Run({"probe", "--root"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("--root needs a value"));
  EXPECT_EQ(ErrorLines(), 1u);
}

TEST_F(ProbeCommand, UnknownOutputFormatExitsTwo) {
  EXPECT_EQ(Run({"probe", "-o", "yaml"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("-o is 'yaml', expected json or text"));
  EXPECT_EQ(ErrorLines(), 1u);
}

TEST_F(ProbeCommand, EmptyRootExitsTwo) {
  EXPECT_EQ(Run({"probe", "--root="}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("--root must not be empty"));
}

TEST_F(ProbeCommand, MissingRootExitsOne) {
  EXPECT_EQ(Run({"probe", "--root", "/nonexistent/probe-root"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("/nonexistent/probe-root does not exist"));
}

TEST_F(ProbeCommand, HelpPrintsUsage) {
  EXPECT_EQ(Run({"probe", "--help"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("usage: weightpath-agent probe"));
}

}  // namespace
}  // namespace weightpath::probe
