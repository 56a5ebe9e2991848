// `weightpath-agent cache list|gc` through the real binary, on a cache the
// real BuildCache filled from file:// sources.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "agent/decision/decision_record.h"
#include "agent/decision/last_good_store.h"
#include "agent/fetch/build_cache.h"
#include "common/clock.h"
#include "tests/agent/model_build.h"
#include "tests/agent/temp_dir.h"
#include "tests/support/subprocess.h"
#include "tests/testing/status_matchers.h"
#include "trust/json.h"

#ifndef WEIGHTPATH_AGENT_BINARY
#error "the test target defines WEIGHTPATH_AGENT_BINARY"
#endif

namespace weightpath::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::TempDir;
using testing::WriteTextFile;
using weightpath::testing::IsOk;
using weightpath::testing::ProcessResult;
using weightpath::testing::RunProcess;

namespace fs = std::filesystem;

class AgentCacheCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.cache_dir = dir_.Sub("cache");
    options_.min_free_bytes = 0;
    for (int version = 0; version < 3; ++version) {
      // Builds 0 and 1 share their first shard; 2 shares nothing.
      builds_.push_back(testing::WriteModelBuild(
          dir_.Sub(absl::StrCat("src/v", version)),
          testing::ModelDirectoryFiles(256 << 10, version == 2 ? 9 : 1, 10 + version),
          "file://" + dir_.Sub(absl::StrCat("src/v", version, "/")), absl::StrCat(version)));
      ASSERT_THAT(MakeBuildCache(options_, SystemClockInstance())
                      ->Stage(builds_.back(), {}, absl::Seconds(30)),
                  IsOk());
    }
    // Build 2 runs (decision_file), build 1 is the last good one.
    WriteDecision(builds_[2], dir_.Sub("run/decision.json"));
    DecisionRecord last_good;
    *last_good.response.mutable_artifact() = builds_[1];
    ASSERT_THAT(SaveLastGood(last_good, dir_.Sub("state")), IsOk());
    WriteConfig("");
  }

  void WriteDecision(const v1::Artifact& artifact, const std::string& path) {
    DecisionRecord record;
    *record.response.mutable_artifact() = artifact;
    WriteTextFile(path, DecisionToJson(record).value());
  }

  void WriteConfig(const std::string& extra) {
    WriteTextFile(dir_.Sub("agent.yaml"),
                  absl::StrCat("server: 127.0.0.1:1\ndevice_id: d\ncache_dir: ", options_.cache_dir,
                               "\nstate_dir: ", dir_.Sub("state"), "\ndecision_file: ",
                               dir_.Sub("run/decision.json"), "\n", extra));
  }

  ProcessResult Agent(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {WEIGHTPATH_AGENT_BINARY, "cache"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }

  trust::Json Json(const ProcessResult& result) {
    absl::StatusOr<trust::Json> json = trust::ParseJson(result.out, "stdout");
    EXPECT_THAT(json, IsOk()) << result.out << result.err;
    return json.ok() ? *json : trust::Json();
  }

  static std::string ShaOf(const v1::Artifact& build, const std::string& path) {
    for (const v1::BuildFile& file : build.files()) {
      if (file.path() == path) return file.sha256();
    }
    return "";
  }

  static std::vector<std::string> Names(const trust::Json& array) {
    std::vector<std::string> names;
    for (const trust::Json& value : array.array()) names.push_back(value.string_value());
    return names;
  }

  TempDir dir_;
  BuildCacheOptions options_;
  std::vector<v1::Artifact> builds_;
};

TEST_F(AgentCacheCommand, ListSaysWhatIsHeldForWhichBuildAndWhatIsReferenced) {
  const ProcessResult listed = Agent({"list", "--config", dir_.Sub("agent.yaml"), "-o", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const trust::Json json = Json(listed);
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json.Find("builds")->array().size(), 3u);
  // The four small files shared by all three builds, the first shard by
  // builds 0 and 1, every other shard its own: 4 + 5 blobs.
  EXPECT_EQ(json.Find("blobs")->array().size(), 9u);
  const std::string shared = ShaOf(builds_[0], "model-00001-of-00002.safetensors");
  for (const trust::Json& blob : json.Find("blobs")->array()) {
    if (blob.Find("sha256")->string_value() != shared) continue;
    EXPECT_THAT(Names(*blob.Find("builds")),
                ::testing::UnorderedElementsAre(builds_[0].sha256(), builds_[1].sha256()));
    EXPECT_THAT(Names(*blob.Find("referenced_by")), ElementsAre("last_good"));
  }
  for (const trust::Json& build : json.Find("builds")->array()) {
    const std::string sha = build.Find("sha256")->string_value();
    const std::vector<std::string> by = Names(*build.Find("referenced_by"));
    if (sha == builds_[2].sha256()) {
      EXPECT_THAT(by, ElementsAre("decision_file"));
    }
    if (sha == builds_[1].sha256()) {
      EXPECT_THAT(by, ElementsAre("last_good"));
    }
    if (sha == builds_[0].sha256()) {
      EXPECT_THAT(by, IsEmpty());
    }
    EXPECT_EQ(build.Find("files")->int_value(), 6);
  }
  EXPECT_GT(json.Find("totals")->Find("blob_bytes")->int_value(), 4 * (256 << 10));

  const ProcessResult text = Agent({"--config", dir_.Sub("agent.yaml")});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("builds (3):"));
  EXPECT_THAT(text.out, HasSubstr("blobs (9, "));
}

TEST_F(AgentCacheCommand, GcKeepsTheRunningAndLastGoodBuildsAndPrintsWhatWent) {
  const ProcessResult gc = Agent({"gc", "--config", dir_.Sub("agent.yaml"), "-o", "json"});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  const trust::Json json = Json(gc);
  EXPECT_THAT(Names(*json.Find("removed")->Find("builds")), ElementsAre(builds_[0].sha256()));
  // No limit: the blobs stay (a rollback re-links them).
  EXPECT_THAT(Names(*json.Find("removed")->Find("blobs")), IsEmpty());
  EXPECT_FALSE(fs::exists(options_.cache_dir + "/builds/" + builds_[0].sha256()));
  EXPECT_TRUE(fs::exists(options_.cache_dir + "/builds/" + builds_[1].sha256()));

  // Under a limit, build 0's own blob (its second shard) goes; the kept
  // builds' blobs stay.
  WriteConfig("cache_max_bytes: 1\n");
  const ProcessResult limited = Agent({"gc", "--config", dir_.Sub("agent.yaml")});
  ASSERT_EQ(limited.exit_code, 0) << limited.err;
  EXPECT_THAT(limited.out, HasSubstr(absl::StrCat("removed blobs ",
                                               ShaOf(builds_[0], "model-00002-of-00002.safetensors"))));
  EXPECT_THAT(limited.out, HasSubstr(absl::StrCat("kept last_good ", builds_[1].sha256())));
  for (const v1::Artifact* kept : {&builds_[1], &builds_[2]}) {
    EXPECT_THAT(MakeBuildCache(options_, SystemClockInstance())->CheckCached(*kept), IsOk());
  }
}

TEST_F(AgentCacheCommand, BadCommandLineIsTwoAndAnUnreadableConfigOne) {
  EXPECT_EQ(Agent({"purge"}).exit_code, 2);
  EXPECT_EQ(Agent({"list", "-o", "yaml", "--config", dir_.Sub("agent.yaml")}).exit_code, 2);
  const ProcessResult missing = Agent({"list", "--config", dir_.Sub("absent.yaml")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("config"));
}

}  // namespace
}  // namespace weightpath::agent
