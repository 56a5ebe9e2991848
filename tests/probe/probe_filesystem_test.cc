// The filesystem seam on a real directory tree.
#include <string>

#include "agent/probe/filesystem.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/probe/probe_test_support.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::probe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;
using testing::TempTree;

TEST(ProbeRootedFilesystem, ResolvesEveryPathUnderTheRoot) {
  TempTree tree;
  tree.Write("/proc/version", "Linux version 6.1.0\n");
  tree.Write("/dev/dri/renderD129", "");
  tree.Write("/dev/dri/renderD128", "");
  tree.Symlink("/sys/class/drm/renderD128/device", "../../../devices/pci0000:00/0000:00:02.0");
  const auto filesystem = MakeRootedFilesystem(tree.root() + "/");

  EXPECT_EQ(filesystem->root(), tree.root());
  auto text = filesystem->ReadFile("/proc/version");
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(*text, "Linux version 6.1.0\n");
  auto names = filesystem->ListDirectory("/dev/dri");
  ASSERT_THAT(names, IsOk());
  EXPECT_THAT(*names, ElementsAre("renderD128", "renderD129"));  // sorted
  auto target = filesystem->ReadSymlink("/sys/class/drm/renderD128/device");
  ASSERT_THAT(target, IsOk());
  EXPECT_EQ(PathBasename(*target), "0000:00:02.0");
  // A dangling link still exists: sysfs driver links are read, not followed.
  EXPECT_TRUE(filesystem->Exists("/sys/class/drm/renderD128/device"));
  EXPECT_FALSE(filesystem->Exists("/proc/cpuinfo"));
}

TEST(ProbeRootedFilesystem, MissingPathsAreNotFoundNamingThePath) {
  TempTree tree;
  tree.Write("/proc/version", "x");
  const auto filesystem = MakeRootedFilesystem(tree.root());
  EXPECT_THAT(filesystem->ReadFile("/proc/cpuinfo"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/proc/cpuinfo")));
  EXPECT_THAT(filesystem->ListDirectory("/sys/bus/pci/devices"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/sys/bus/pci/devices")));
  EXPECT_THAT(filesystem->ReadSymlink("/proc/version"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("/proc/version")));
}

TEST(ProbeRootedFilesystem, BasenameOfLinkTargets) {
  EXPECT_EQ(PathBasename("../../../bus/pci/drivers/i915"), "i915");
  EXPECT_EQ(PathBasename("amdxdna"), "amdxdna");
  EXPECT_EQ(PathBasename("/sys/devices/soc0/"), "soc0");
}

}  // namespace
}  // namespace weightpath::probe
