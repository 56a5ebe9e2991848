// The reload logic in-process: CheckNow() is driven by the test, so no
// polling thread and no sleeps (but for the one test of a requested reload).
#include "server/config_watcher.h"

#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "prometheus/text_serializer.h"
#include "server/config/content_hash.h"
#include "server/config/demo_catalog.h"
#include "tests/server/server_process.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::server {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;
using Result = ConfigWatcher::Result;

std::string PolicyText() { return std::string(policy::DefaultPolicyYaml()); }
std::string CatalogText() { return testing::SingleFileCatalogYaml(); }

class ServerConfigWatcherTest : public ::testing::Test {
 protected:
  ServerConfigWatcherTest()
      : policy_path_(dir_.File("policy.yaml")),
        catalog_path_(dir_.File("catalog.yaml")),
        metrics_(std::make_shared<prometheus::Registry>()),
        watcher_({policy_path_, catalog_path_}, &holder_, &metrics_, absl::ZeroDuration()) {
    testing::WriteFileOrDie(policy_path_, PolicyText());
    testing::WriteFileOrDie(catalog_path_, CatalogText());
  }

  // Rename over the file, as editors do; a new inode every time.
  void Replace(const std::string& path, const std::string& contents) {
    testing::WriteFileOrDie(path + ".new", contents);
    ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
  }

  double Metric(const std::string& series) {
    const std::string text = prometheus::TextSerializer().Serialize(metrics_.registry()->Collect());
    absl::StatusOr<double> value = testing::SampleValue(text, series);
    return value.ok() ? *value : -1;
  }

  std::string PolicyVersion() { return holder_.Current()->policy->version(); }

  testing::TempDir dir_;
  const std::string policy_path_;
  const std::string catalog_path_;
  SnapshotHolder holder_;
  ServerMetrics metrics_;
  ConfigWatcher watcher_;
};

TEST_F(ServerConfigWatcherTest, LoadsBothFilesAndReportsTheirVersions) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  EXPECT_EQ(PolicyVersion(), ShortContentVersion(PolicyText()));
  EXPECT_EQ(holder_.Current()->catalog->version(), ShortContentVersion(CatalogText()));
  EXPECT_EQ(Metric("weightpath_policy_info{catalog_version=\"" +
                   ShortContentVersion(CatalogText()) + "\",version=\"" +
                   ShortContentVersion(PolicyText()) + "\"}"),
            1);
  EXPECT_EQ(watcher_.CheckNow(), Result::kUnchanged);
}

TEST_F(ServerConfigWatcherTest, ChangedPolicyIsSwappedInAndCounted) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  const std::shared_ptr<const Snapshot> before = holder_.Share();
  Replace(policy_path_, PolicyText() + "\n# revised\n");
  EXPECT_EQ(watcher_.CheckNow(), Result::kReloaded);
  EXPECT_EQ(PolicyVersion(), ShortContentVersion(PolicyText() + "\n# revised\n"));
  EXPECT_NE(holder_.Share(), before);
  EXPECT_EQ(Metric("weightpath_policy_reloads_total{result=\"success\"}"), 1);
  EXPECT_EQ(watcher_.CheckNow(), Result::kUnchanged);
}

TEST_F(ServerConfigWatcherTest, SameContentUnderANewInodeIsNotAReload) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  Replace(policy_path_, PolicyText());
  EXPECT_EQ(watcher_.CheckNow(), Result::kUnchanged);
  EXPECT_EQ(Metric("weightpath_policy_reloads_total{result=\"success\"}"), 0);
}

TEST_F(ServerConfigWatcherTest, BrokenPolicyIsRefusedOnceAndTheOldPairKeepsServing) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  const std::shared_ptr<const Snapshot> before = holder_.Share();
  Replace(policy_path_, "rules: [\n");
  EXPECT_EQ(watcher_.CheckNow(), Result::kRefused);
  EXPECT_EQ(holder_.Share(), before);
  // Not retried (nor re-counted) until the file changes again.
  EXPECT_EQ(watcher_.CheckNow(), Result::kUnchanged);
  EXPECT_EQ(Metric("weightpath_policy_reloads_total{result=\"error\"}"), 1);
  Replace(policy_path_, PolicyText() + "\n# fixed\n");
  EXPECT_EQ(watcher_.CheckNow(), Result::kReloaded);
}

TEST_F(ServerConfigWatcherTest, CatalogMissingAReachablePathIsRefused) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  std::string catalog = CatalogText();
  const size_t at = catalog.find("    w4a8-amx:");
  catalog.replace(at, 13, "    w4a8-gone:");
  Replace(catalog_path_, catalog);
  EXPECT_EQ(watcher_.CheckNow(), Result::kRefused);
  EXPECT_EQ(holder_.Current()->catalog->version(), ShortContentVersion(CatalogText()));
}

TEST_F(ServerConfigWatcherTest, DeletedFileIsRefusedAndItsReturnReloads) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  ASSERT_EQ(std::remove(policy_path_.c_str()), 0);
  EXPECT_EQ(watcher_.CheckNow(), Result::kRefused);
  testing::WriteFileOrDie(policy_path_, PolicyText() + "\n# back\n");
  EXPECT_EQ(watcher_.CheckNow(), Result::kReloaded);
}

TEST_F(ServerConfigWatcherTest, ReloadNowRereadsWithoutAFingerprintChange) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  EXPECT_EQ(watcher_.ReloadNow(), Result::kUnchanged);
  Replace(catalog_path_, CatalogText() + "\n# new catalog revision\n");
  EXPECT_EQ(watcher_.ReloadNow(), Result::kReloaded);
  EXPECT_EQ(holder_.Current()->catalog->version(),
            ShortContentVersion(CatalogText() + "\n# new catalog revision\n"));
}

TEST_F(ServerConfigWatcherTest, InitialLoadErrorNamesTheFile) {
  testing::WriteFileOrDie(policy_path_, "not: [valid\n");
  EXPECT_THAT(watcher_.LoadInitial(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(policy_path_)));
}

TEST_F(ServerConfigWatcherTest, AliasAmplifiedPolicyIsRefused) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  const std::shared_ptr<const Snapshot> before = holder_.Share();
  std::string bomb = "schema: 1\npaths:\n  - id: a\n    name: bf16\n    rationale: &big " +
                     std::string(1 << 20, 'x') + "\n    notes:\n";
  for (int i = 0; i < 4000; ++i) bomb += "      - *big\n";
  bomb += "rules:\n  - {name: rest, path: a}\n";
  Replace(policy_path_, bomb);
  EXPECT_EQ(watcher_.CheckNow(), Result::kRefused);
  EXPECT_EQ(holder_.Share(), before);
  EXPECT_EQ(Metric("weightpath_policy_reloads_total{result=\"error\"}"), 1);
}

TEST_F(ServerConfigWatcherTest, RequestedReloadRunsOnTheWatchersThread) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  // Polling is off (zero interval): only the request makes it reload.
  watcher_.Start();
  const std::string revised = PolicyText() + "\n# requested\n";
  Replace(policy_path_, revised);
  watcher_.RequestReload();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (PolicyVersion() != ShortContentVersion(revised) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(PolicyVersion(), ShortContentVersion(revised));
  watcher_.Stop();
}

TEST_F(ServerConfigWatcherTest, AReloadAfterStopIsAbandonedAndNotCounted) {
  ASSERT_THAT(watcher_.LoadInitial(), IsOk());
  const std::shared_ptr<const Snapshot> before = holder_.Share();
  watcher_.BeginStop();
  Replace(policy_path_, PolicyText() + "\n# too late\n");
  EXPECT_EQ(watcher_.ReloadNow(), Result::kCancelled);
  EXPECT_EQ(holder_.Share(), before);
  EXPECT_EQ(Metric("weightpath_policy_reloads_total{result=\"error\"}"), 0);
}

TEST(ServerSnapshotHolderTest, PublishedSnapshotIsSeenByTheNextRead) {
  auto first = std::make_shared<Snapshot>();
  first->policy = policy::DefaultPolicy();
  SnapshotHolder holder(first);
  EXPECT_EQ(holder.Current().get(), first.get());
  auto second = std::make_shared<Snapshot>(*first);
  holder.Publish(second);
  EXPECT_EQ(holder.Current().get(), second.get());
  // A second holder on the same thread does not see the first one's cache.
  SnapshotHolder other(first);
  EXPECT_EQ(other.Current().get(), first.get());
  EXPECT_EQ(holder.Current().get(), second.get());
}

}  // namespace
}  // namespace weightpath::server
