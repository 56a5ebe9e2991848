// weightpathctl repo on the way to a canary build, the real binary on a real
// directory: what --model means when it is left out, a second build of one
// model's weight path (refused unless it is a canary), and `repo sign` with
// nothing staged or nothing listed.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "trust/json.h"

namespace weightpath::ctl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;

ProcessResult Ctl(std::vector<std::string> args) {
  args.insert(args.begin(), WEIGHTPATHCTL_PATH);
  return RunProcess(args);
}

class CtlRepoCanaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ctl_canary_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    repo_ = dir_ + "/repo";
    ProcessResult init = Ctl({"repo", "init", "--repo", repo_, "--generate-keys", dir_ + "/keys"});
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Key(const std::string& role) const { return dir_ + "/keys/" + role + ".pem"; }

  // A single-file build of `weight_path` at `path`, with `extra` flags.
  ProcessResult AddBuild(const std::string& path, const std::string& weight_path,
                         const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"repo", "add-target", "--repo", repo_, "--path", path,
                                     "--length", "4096", "--sha256", std::string(64, 'c'),
                                     "--weight-path", weight_path, "--version", "2026.12.1",
                                     "--hardware-classes", "x86_cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Ctl(args);
  }

  ProcessResult Sign(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"repo", "sign", "--repo", repo_, "--role", "targets",
                                     "--key", Key("targets")};
    args.insert(args.end(), extra.begin(), extra.end());
    return Ctl(args);
  }

  // custom of `path` in the staged targets.
  trust::Json StagedCustom(const std::string& path) const {
    std::ifstream in(repo_ + "/staged/targets.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    absl::StatusOr<trust::Json> json = trust::ParseJson(text, "targets.json");
    EXPECT_TRUE(json.ok()) << json.status();
    if (!json.ok()) return trust::Json();
    const trust::Json* custom = json->Find("signed")->Find("targets")->Find(path)->Find("custom");
    return custom == nullptr ? trust::Json() : *custom;
  }

  std::string dir_, repo_;
};

TEST_F(CtlRepoCanaryTest, ModelIsTheTargetsOnlyModelAndRequiredWhenThereIsNoneOrSeveral) {
  // The first build: no model to take.
  ProcessResult first = AddBuild("spark/w4a8-amx.bin", "w4a8-amx", {});
  EXPECT_EQ(first.exit_code, 2);
  EXPECT_THAT(first.err, HasSubstr("--model is required: targets v2 list no weightpath build yet"));
  ASSERT_EQ(AddBuild("spark/w4a8-amx.bin", "w4a8-amx", {"--model", "Spark-X2.5-1.7B"}).exit_code,
            0);

  // The next one takes it, and says so.
  ProcessResult next = AddBuild("spark/bf16.bin", "bf16", {});
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_THAT(next.out, HasSubstr("model Spark-X2.5-1.7B (the one model the targets list"));
  EXPECT_EQ(StagedCustom("spark/bf16.bin").Find("model")->string_value(), "Spark-X2.5-1.7B");

  // With two models there is no guess.
  ASSERT_EQ(AddBuild("other/bf16.bin", "bf16", {"--model", "Other-7B"}).exit_code, 0);
  ProcessResult ambiguous = AddBuild("spark/fp16.bin", "fp16", {});
  EXPECT_EQ(ambiguous.exit_code, 2);
  EXPECT_THAT(ambiguous.err,
              HasSubstr("--model is required: targets v2 list several models (Other-7B, "
                        "Spark-X2.5-1.7B)"));

  // A build names its path, version and classes; --model alone is not one.
  ProcessResult partial =
      Ctl({"repo", "add-target", "--repo", repo_, "--path", "x.bin", "--length", "1", "--sha256",
           std::string(64, 'd'), "--model", "Spark-X2.5-1.7B"});
  EXPECT_EQ(partial.exit_code, 2);
  EXPECT_THAT(partial.err, HasSubstr("--weight-path is required: a weightpath build names"));
  // The help says which flags make a build, and that --model may be left out.
  ProcessResult help = Ctl({"repo", "add-target", "--help"});
  EXPECT_THAT(help.out, AllOf(HasSubstr("the one model the targets already list"),
                              HasSubstr("--canary")));
}

TEST_F(CtlRepoCanaryTest, ASecondBuildOfAPathIsACanaryOrRefused) {
  ASSERT_EQ(AddBuild("spark/w4a8-amx/2026.12.1.bin", "w4a8-amx", {"--model", "Spark"}).exit_code,
            0);
  ProcessResult second = AddBuild("spark/w4a8-amx/2026.12.2.bin", "w4a8-amx", {});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err,
              AllOf(HasSubstr("target 'spark/w4a8-amx/2026.12.1.bin' is already the Spark "
                              "w4a8-amx build every device is served"),
                    HasSubstr("add this one with --canary")));

  ProcessResult canary = AddBuild("spark/w4a8-amx/2026.12.2.bin", "w4a8-amx", {"--canary"});
  ASSERT_EQ(canary.exit_code, 0) << canary.err;
  // What to paste into a rollout file.
  EXPECT_THAT(canary.out, AllOf(HasSubstr("a canary of Spark w4a8-amx"),
                                HasSubstr("pin_artifact:\n        path: w4a8-amx\n"
                                          "        artifact: {target_path: "
                                          "spark/w4a8-amx/2026.12.2.bin}")));
  EXPECT_TRUE(StagedCustom("spark/w4a8-amx/2026.12.2.bin").Find("canary")->bool_value());
  // The default build's custom carries no mark.
  EXPECT_EQ(StagedCustom("spark/w4a8-amx/2026.12.1.bin").Find("canary"), nullptr);
  // Replacing the default in place is no second build.
  EXPECT_EQ(AddBuild("spark/w4a8-amx/2026.12.1.bin", "w4a8-amx", {"--replace"}).exit_code, 0);
}

TEST_F(CtlRepoCanaryTest, SignRefusesNothingStagedAndATargetsListingNothing) {
  ProcessResult nothing = Sign();
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_THAT(nothing.err,
              HasSubstr("nothing is staged for targets v2: stage a change with `weightpathctl "
                        "repo add-target or remove-target` first, or renew the published targets "
                        "as is with --expires"));
  EXPECT_FALSE(std::filesystem::exists(repo_ + "/staged/targets.json"));
  ProcessResult root = Ctl({"repo", "sign", "--repo", repo_, "--role", "root", "--key", Key("root")});
  EXPECT_EQ(root.exit_code, 1);
  EXPECT_THAT(root.err, HasSubstr("nothing is staged for root v2"));

  // Renewing on purpose is still one flag away.
  ProcessResult renewed = Sign({"--expires", "30d"});
  EXPECT_EQ(renewed.exit_code, 0) << renewed.err;

  // A staged edit that leaves nothing listed needs saying so.
  ASSERT_EQ(AddBuild("a.bin", "w4a8-amx", {"--model", "Spark"}).exit_code, 0);
  ASSERT_EQ(Ctl({"repo", "remove-target", "--repo", repo_, "--path", "a.bin"}).exit_code, 0);
  ProcessResult empty = Sign();
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_THAT(empty.err, HasSubstr("targets v2 would list no target at all"));
  EXPECT_THAT(empty.err, Not(HasSubstr("nothing is staged")));
  EXPECT_EQ(Sign({"--allow-empty"}).exit_code, 0);
}

}  // namespace
}  // namespace weightpath::ctl
