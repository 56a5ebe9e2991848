// Hot reload with the real binary: a client keeps resolving while the policy
// file is replaced (rename, ConfigMap-style symlink swap, SIGHUP).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "server/config/content_hash.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kReloadTimeout = absl::Seconds(30);

std::string DefaultPolicyText() { return std::string(policy::DefaultPolicyYaml()); }
// Same rules, different bytes: a new valid version.
std::string SecondPolicyText() { return DefaultPolicyText() + "\n# second revision\n"; }
std::string BrokenPolicyText() { return DefaultPolicyText() + "\nthis_key_is_unknown: 1\n"; }

// Replaces `path` the way editors and config tools do: write aside, rename.
void ReplaceByRename(const std::string& path, const std::string& contents) {
  const std::string aside = path + ".tmp";
  WriteFileOrDie(aside, contents);
  ASSERT_EQ(rename(aside.c_str(), path.c_str()), 0);
}

absl::StatusOr<double> ScrapeSample(const ServerProcess& server, const std::string& series) {
  absl::StatusOr<std::string> text = HttpGet(server.metrics_address(), "/metrics");
  if (!text.ok()) return text.status();
  return SampleValue(*text, series);
}

bool WaitForSample(const ServerProcess& server, const std::string& series, double value) {
  const absl::Time deadline = absl::Now() + kReloadTimeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<double> now = ScrapeSample(server, series);
    if (now.ok() && *now == value) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// Resolves in a loop on its own thread and records every version it sees.
class Hammer {
 public:
  explicit Hammer(const std::string& address)
      : stub_(v1::WeightPath::NewStub(PlaintextChannel(address))),
        thread_([this] { Run(); }) {}
  ~Hammer() { Stop(); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool WaitForVersion(const std::string& version) {
    const absl::Time deadline = absl::Now() + kReloadTimeout;
    while (absl::Now() < deadline) {
      {
        absl::MutexLock lock(&mutex_);
        if (!versions_.empty() && versions_.back() == version) return true;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }
  int failures() const { return failures_; }
  int calls() const { return calls_; }
  // Consecutive distinct versions, e.g. {v1, v2} when it switched once.
  std::vector<std::string> VersionRuns() {
    absl::MutexLock lock(&mutex_);
    return versions_;
  }

 private:
  void Run() {
    const v1::ResolveWeightPathRequest request = AmxRequest("hammer");
    while (!stop_) {
      v1::ResolveWeightPathResponse response;
      const grpc::Status status = CallResolve(*stub_, request, &response);
      ++calls_;
      if (!status.ok() || response.weight_path().name() != "w4a8-amx") {
        ++failures_;
        continue;
      }
      absl::MutexLock lock(&mutex_);
      if (versions_.empty() || versions_.back() != response.policy_version()) {
        versions_.push_back(response.policy_version());
      }
    }
  }

  std::unique_ptr<v1::WeightPath::Stub> stub_;
  std::atomic<bool> stop_{false};
  std::atomic<int> failures_{0};
  std::atomic<int> calls_{0};
  absl::Mutex mutex_;
  std::vector<std::string> versions_ ABSL_GUARDED_BY(mutex_);
  std::thread thread_;
};

TEST(ServerReloadTest, ReplacedPolicySwitchesOnceUnderLoadAndABrokenOneIsRefused) {
  TempDir dir;
  const std::string policy_path = dir.File("policy.yaml");
  WriteFileOrDie(policy_path, DefaultPolicyText());
  auto server = ServerProcess::Start({"--policy=" + policy_path, "--reload_interval=50ms"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string first_version = ShortContentVersion(DefaultPolicyText());
  const std::string second_version = ShortContentVersion(SecondPolicyText());

  Hammer hammer((*server)->grpc_address());
  ASSERT_TRUE(hammer.WaitForVersion(first_version));
  ReplaceByRename(policy_path, SecondPolicyText());
  ASSERT_TRUE(hammer.WaitForVersion(second_version)) << (*server)->Log();
  ReplaceByRename(policy_path, BrokenPolicyText());
  EXPECT_TRUE(WaitForSample(**server, "weightpath_policy_reloads_total{result=\"error\"}", 1))
      << (*server)->Log();
  const int calls_at_refusal = hammer.calls();
  // Keep going a little past the refusal: the last good policy must serve on.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (hammer.calls() < calls_at_refusal + 50 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  hammer.Stop();

  EXPECT_EQ(hammer.failures(), 0);
  EXPECT_GT(hammer.calls(), calls_at_refusal);
  EXPECT_THAT(hammer.VersionRuns(), ::testing::ElementsAre(first_version, second_version));
  absl::StatusOr<double> succeeded =
      ScrapeSample(**server, "weightpath_policy_reloads_total{result=\"success\"}");
  ASSERT_TRUE(succeeded.ok()) << succeeded.status();
  EXPECT_EQ(*succeeded, 1);
  const std::string log = (*server)->Log();
  EXPECT_THAT(log, HasSubstr("reload refused"));
  EXPECT_THAT(log, HasSubstr("this_key_is_unknown"));
  absl::StatusOr<std::string> metrics = HttpGet((*server)->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(*metrics, HasSubstr(absl::StrCat("version=\"", second_version, "\"} 1")));
  // The info series names only the policy in force. (Devices that last
  // resolved with the first policy are still counted under its version by
  // weightpath_devices_by_policy_version: that is what stale-policy
  // detection reads.)
  std::string info;
  for (absl::string_view line : absl::StrSplit(*metrics, '\n')) {
    if (absl::StartsWith(line, "weightpath_policy_info{")) absl::StrAppend(&info, line, "\n");
  }
  EXPECT_THAT(info, HasSubstr(absl::StrCat("version=\"", second_version, "\"} 1")));
  EXPECT_THAT(info, ::testing::Not(HasSubstr(first_version)));
}

TEST(ServerReloadTest, ConfigMapStyleSymlinkSwapIsDetected) {
  // The kubelet's layout: policy.yaml -> ..data/policy.yaml, ..data -> ..<stamp>/
  TempDir dir;
  namespace fs = std::filesystem;
  fs::create_directory(dir.File("..2026_first"));
  WriteFileOrDie(dir.File("..2026_first/policy.yaml"), DefaultPolicyText());
  fs::create_directory_symlink("..2026_first", dir.File("..data"));
  fs::create_symlink("..data/policy.yaml", dir.File("policy.yaml"));
  auto server =
      ServerProcess::Start({"--policy=" + dir.File("policy.yaml"), "--reload_interval=50ms"});
  ASSERT_TRUE(server.ok()) << server.status();

  Hammer hammer((*server)->grpc_address());
  ASSERT_TRUE(hammer.WaitForVersion(ShortContentVersion(DefaultPolicyText())));
  fs::create_directory(dir.File("..2026_second"));
  WriteFileOrDie(dir.File("..2026_second/policy.yaml"), SecondPolicyText());
  fs::create_directory_symlink("..2026_second", dir.File("..data_tmp"));
  fs::rename(dir.File("..data_tmp"), dir.File("..data"));
  EXPECT_TRUE(hammer.WaitForVersion(ShortContentVersion(SecondPolicyText()))) << (*server)->Log();
  hammer.Stop();
  EXPECT_EQ(hammer.failures(), 0);
}

TEST(ServerReloadTest, SighupReloadsWithPollingOff) {
  TempDir dir;
  const std::string policy_path = dir.File("policy.yaml");
  WriteFileOrDie(policy_path, DefaultPolicyText());
  auto server = ServerProcess::Start({"--policy=" + policy_path, "--reload_interval=0s"});
  ASSERT_TRUE(server.ok()) << server.status();
  ReplaceByRename(policy_path, SecondPolicyText());
  (*server)->Signal(SIGHUP);
  Hammer hammer((*server)->grpc_address());
  EXPECT_TRUE(hammer.WaitForVersion(ShortContentVersion(SecondPolicyText()))) << (*server)->Log();
  hammer.Stop();
  EXPECT_EQ(hammer.failures(), 0);
}

}  // namespace
}  // namespace weightpath::server::testing
