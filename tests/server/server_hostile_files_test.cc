// Hostile policy and catalog files against the real binary: alias
// amplification, a symlink flipped to /dev/zero or a FIFO between reloads,
// policies too large or too costly to check, and SIGTERM during a slow
// reload. Each time the reload is refused with an error naming the limit,
// the last good policy keeps serving, memory stays bounded, and shutdown
// keeps to its grace period. ReadWholeFile, which every server-side file
// read goes through, is tested in-process at the end.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "policy/policy_limits.h"
#include "server/config/catalog.h"
#include "server/config/content_hash.h"
#include "server/config/demo_catalog.h"
#include "server/config/file_fingerprint.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

// Generous for a loaded 2-core CI machine; the work itself takes well under
// a second.
constexpr absl::Duration kWait = absl::Seconds(30);
// A server that never copied a hostile file out stays far below this; one
// that did would need gigabytes, or die.
constexpr int64_t kPeakRssBoundKb = 300 * 1024;

const char kErrorReloads[] = "weightpath_policy_reloads_total{result=\"error\"}";

std::string GoodPolicy() { return std::string(policy::DefaultPolicyYaml()); }
std::string SecondGoodPolicy() { return GoodPolicy() + "\n# second revision\n"; }

absl::StatusOr<double> Scrape(const ServerProcess& server, const std::string& series) {
  absl::StatusOr<std::string> text = HttpGet(server.metrics_address(), "/metrics");
  if (!text.ok()) return text.status();
  return SampleValue(*text, series);
}

bool WaitForSampleAtLeast(const ServerProcess& server, const std::string& series, double value) {
  const absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    absl::StatusOr<double> now = Scrape(server, series);
    if (now.ok() && *now >= value) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

// The policy version one resolve is answered with; empty when it fails.
std::string ServedVersion(const ServerProcess& server) {
  auto stub = v1::WeightPath::NewStub(PlaintextChannel(server.grpc_address()));
  v1::ResolveWeightPathResponse response;
  const grpc::Status status = CallResolve(*stub, AmxRequest("probe-device"), &response);
  return status.ok() ? response.policy_version() : "";
}

bool WaitForServedVersion(const ServerProcess& server, const std::string& version) {
  const absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    if (ServedVersion(server) == version) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// VmHWM: the most resident memory the process ever had.
int64_t PeakRssKb(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view view = line;
    if (!absl::ConsumePrefix(&view, "VmHWM:")) continue;
    view = absl::StripAsciiWhitespace(view);
    absl::ConsumeSuffix(&view, " kB");
    int64_t kb = 0;
    if (absl::SimpleAtoi(view, &kb)) return kb;
  }
  return -1;
}

// When the text log line holding `what` was written (its UTC timestamp);
// InfinitePast when there is none, which fails any later comparison.
absl::Time LoggedAt(const std::string& log, absl::string_view what) {
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StrContains(line, what)) continue;
    absl::Time at;
    std::string error;
    if (absl::ParseTime("%Y-%m-%dT%H:%M:%E*S", std::string(line.substr(0, line.find(' '))),
                        absl::UTCTimeZone(), &at, &error)) {
      return at;
    }
  }
  ADD_FAILURE() << "no log line with " << what << " in\n" << log;
  return absl::InfinitePast();
}

// Writes aside and renames over, so the server never reads half a file.
void Replace(const std::string& path, const std::string& contents) {
  WriteFileOrDie(path + ".tmp", contents);
  ASSERT_EQ(std::rename((path + ".tmp").c_str(), path.c_str()), 0);
}

// Points the symlink `link` at `target` in one rename.
void Repoint(const std::string& link, const std::string& target) {
  const std::string aside = link + ".new";
  std::filesystem::remove(aside);
  std::filesystem::create_symlink(target, aside);
  std::filesystem::rename(aside, link);
}

// ~1 MiB of policy whose notes repeat a 1 MiB string 4000 times: 4 GB for a
// reader that copies the strings out.
std::string AliasBombPolicy() {
  std::string text = "schema: 1\npaths:\n  - id: a\n    name: bf16\n    rationale: &big " +
                     std::string(1 << 20, 'x') + "\n    notes:\n";
  for (int i = 0; i < 4000; ++i) text += "      - *big\n";
  text += "rules:\n  - {name: rest, path: a}\n";
  return text;
}

// `count` valid rules (block style, like an operator's file) and a catch-all.
std::string ManyRulesPolicy(int count, const std::string& extra_match = "") {
  std::string text = "schema: 1\npaths:\n  - {id: a, name: bf16, rationale: r}\nrules:\n";
  for (int i = 0; i < count; ++i) {
    absl::StrAppend(&text, "  - name: rule-", i, "\n    match:\n",
                    "      priority: [speed, fidelity]\n      labels: {tier: t", i, "}\n",
                    extra_match, "    path: a\n");
  }
  text += "  - name: rest\n    path: a\n";
  return text;
}

// Valid but as costly to check as the totality budget allows: 999 label
// rules naming 4 cpu flags make ~700k abstract profiles, most tested against
// most rules, so the check runs into its budget after about a second.
std::string CostlyPolicy() {
  return ManyRulesPolicy(static_cast<int>(policy::kMaxPolicyRules) - 1,
                         "      cpu_flags_none: [f0, f1, f2, f3]\n");
}

TEST(ServerHostileFilesTest, AliasAmplifiedPolicyIsRefusedAndTheLastGoodOneServes) {
  TempDir dir;
  const std::string policy_path = dir.File("policy.yaml");
  WriteFileOrDie(policy_path, GoodPolicy());
  auto server = ServerProcess::Start(
      {"--policy=" + policy_path, "--reload_interval=0s", "--store=none"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string good_version = ShortContentVersion(GoodPolicy());
  ASSERT_EQ(ServedVersion(**server), good_version);

  const std::string bomb = AliasBombPolicy();
  ASSERT_LT(bomb.size(), size_t{1200000});
  Replace(policy_path, bomb);
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(WaitForSampleAtLeast(**server, kErrorReloads, 1)) << (*server)->Log();

  EXPECT_EQ(ServedVersion(**server), good_version);
  const std::string log = (*server)->Log();
  EXPECT_THAT(log, HasSubstr("reload refused, the last good policy keeps serving"));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("more than ", policy::kMaxPolicyBytes,
                                          " bytes of text once aliases are expanded")));
  EXPECT_THAT(log, HasSubstr("alias *big repeats 1048576 bytes"));
  EXPECT_LT(PeakRssKb((*server)->pid()), kPeakRssBoundKb);

  // It goes on reloading good files.
  Replace(policy_path, SecondGoodPolicy());
  (*server)->Signal(SIGHUP);
  EXPECT_TRUE(WaitForServedVersion(**server, ShortContentVersion(SecondGoodPolicy())))
      << (*server)->Log();
}

TEST(ServerHostileFilesTest, AliasAmplifiedCatalogIsRefused) {
  TempDir dir;
  const std::string catalog_path = dir.File("catalog.yaml");
  WriteFileOrDie(catalog_path, testing::SingleFileCatalogYaml());
  auto server = ServerProcess::Start(
      {"--catalog=" + catalog_path, "--reload_interval=0s", "--store=none"});
  ASSERT_TRUE(server.ok()) << server.status();

  std::string bomb = testing::SingleFileCatalogYaml() + "\nnotes:\n  - &big " +
                     std::string(1 << 20, 'y') + "\n";
  for (int i = 0; i < 4000; ++i) bomb += "  - *big\n";
  Replace(catalog_path, bomb);
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(WaitForSampleAtLeast(**server, kErrorReloads, 1)) << (*server)->Log();
  EXPECT_FALSE(ServedVersion(**server).empty());
  EXPECT_THAT((*server)->Log(),
              HasSubstr(absl::StrCat(catalog_path, ":")));
  EXPECT_THAT((*server)->Log(), HasSubstr(absl::StrCat("more than ", kMaxCatalogBytes,
                                                       " bytes of text once aliases")));
  EXPECT_LT(PeakRssKb((*server)->pid()), kPeakRssBoundKb);
}

TEST(ServerHostileFilesTest, SymlinkFlippedToDevZeroOrAFifoIsRefusedAndBounded) {
  TempDir dir;
  const std::string good = dir.File("good.yaml");
  const std::string second = dir.File("second.yaml");
  const std::string fifo = dir.File("fifo");
  const std::string link = dir.File("policy.yaml");
  WriteFileOrDie(good, GoodPolicy());
  WriteFileOrDie(second, SecondGoodPolicy());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink(good, link);
  auto server = ServerProcess::Start(
      {"--policy=" + link, "--reload_interval=10ms", "--store=none"});
  ASSERT_TRUE(server.ok()) << server.status();

  // A thread flips the link as fast as it can while SIGHUPs and the poller
  // keep reloading, so some reloads land between a check of the path and
  // the read. Whatever the server opens must be the real file or be refused:
  // reading /dev/zero unbounded, or blocking on the FIFO, would show below.
  std::atomic<bool> flipping{true};
  std::thread flipper([&] {
    const std::string targets[] = {"/dev/zero", good, fifo, good};
    for (size_t i = 0; flipping; ++i) Repoint(link, targets[i % 4]);
  });
  const absl::Time until = absl::Now() + absl::Milliseconds(1500);
  while (absl::Now() < until) {
    (*server)->Signal(SIGHUP);
    absl::SleepFor(absl::Milliseconds(2));
  }
  flipping = false;
  flipper.join();
  ASSERT_TRUE(WaitForSampleAtLeast(**server, kErrorReloads, 2)) << (*server)->Log();
  Repoint(link, second);
  (*server)->Signal(SIGHUP);
  EXPECT_TRUE(WaitForServedVersion(**server, ShortContentVersion(SecondGoodPolicy())))
      << (*server)->Log();

  const std::string log = (*server)->Log();
  int refusals = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    refusals += absl::StrContains(line, "reload refused") ? 1 : 0;
  }
  std::printf("%d reloads refused while the link flipped\n", refusals);
  EXPECT_GE(refusals, 20) << "too few reloads raced the flips";
  EXPECT_THAT(log, HasSubstr(absl::StrCat(link, ": a character device, not a regular file")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat(link, ": a FIFO, not a regular file")));
  EXPECT_LT(PeakRssKb((*server)->pid()), kPeakRssBoundKb);
}

TEST(ServerHostileFilesTest, FortyThousandRulePolicyIsRefusedQuickly) {
  TempDir dir;
  const std::string policy_path = dir.File("policy.yaml");
  WriteFileOrDie(policy_path, GoodPolicy());
  auto server = ServerProcess::Start(
      {"--policy=" + policy_path, "--reload_interval=0s", "--store=none"});
  ASSERT_TRUE(server.ok()) << server.status();

  const std::string huge = ManyRulesPolicy(40000);
  ASSERT_GT(huge.size(), size_t{4} << 20);
  Replace(policy_path, huge);
  const absl::Time start = absl::Now();
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(WaitForSampleAtLeast(**server, kErrorReloads, 1)) << (*server)->Log();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // Its YAML is past the node limit before a rule is read.
  EXPECT_THAT((*server)->Log(), HasSubstr(absl::StrCat("more than ", policy::kMaxPolicyNodes,
                                                       " nodes once aliases are expanded")));

  // Small enough to parse, one rule over the limit: named as such.
  Replace(policy_path, ManyRulesPolicy(static_cast<int>(policy::kMaxPolicyRules)));
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(WaitForSampleAtLeast(**server, kErrorReloads, 2)) << (*server)->Log();
  EXPECT_THAT((*server)->Log(), HasSubstr("rules: 1001 rules; a policy may have at most 1000"));
  EXPECT_EQ(ServedVersion(**server), ShortContentVersion(GoodPolicy()));
}

TEST(ServerHostileFilesTest, SigtermDuringASlowReloadExitsWithinTheGrace) {
  TempDir dir;
  const std::string policy_path = dir.File("policy.yaml");
  WriteFileOrDie(policy_path, GoodPolicy());
  auto server = ServerProcess::Start({"--policy=" + policy_path, "--reload_interval=0s",
                                      "--store=none", "--shutdown_grace=0s"});
  ASSERT_TRUE(server.ok()) << server.status();

  // First, how long the costliest reload takes here when left alone.
  Replace(policy_path, CostlyPolicy());
  const absl::Time first = absl::Now();
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(WaitForSampleAtLeast(**server, kErrorReloads, 1)) << (*server)->Log();
  const absl::Duration whole_reload = absl::Now() - first;
  ASSERT_THAT((*server)->Log(), HasSubstr("policy too costly to check for totality"));

  // Then SIGTERM a fifth of the way into the same reload.
  (*server)->Signal(SIGHUP);
  absl::SleepFor(whole_reload / 5);
  (*server)->Signal(SIGTERM);
  const ExitResult result = (*server)->WaitForExit(kWait);

  EXPECT_EQ(result.exit_code, 0) << result.log;
  const absl::Time sigterm = LoggedAt(result.log, "SIGTERM: shutting down");
  const absl::Time abandoned = LoggedAt(result.log, "reload abandoned: shutting down");
  const absl::Time grpc_stopped = LoggedAt(result.log, "gRPC server stopped");
  const absl::Time stopped = LoggedAt(result.log, "I stopped");
  // The reload had most of its work left; it was abandoned at once, and the
  // shutdown (grace 0s) did not wait for it.
  EXPECT_LT(abandoned - sigterm, whole_reload / 2) << "whole reload " << whole_reload << "\n"
                                                   << result.log;
  EXPECT_LT(grpc_stopped - sigterm, whole_reload / 2) << result.log;
  // What remains after the gRPC server is the metrics listener's own stop:
  // civetweb notices it only between 2 s polls.
  EXPECT_LT(stopped - grpc_stopped, absl::Seconds(3)) << result.log;
}

TEST(ServerHostileFilesTest, ReadWholeFileRefusesWhatIsNotARegularFile) {
  TempDir dir;
  EXPECT_THAT(ReadWholeFile("/dev/zero", 1024),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("/dev/zero: a character device, not a regular file")));
  EXPECT_THAT(ReadWholeFile(dir.path(), 1024),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a directory")));
  // A FIFO with no writer: refused at once, not waited on.
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const absl::Time start = absl::Now();
  EXPECT_THAT(ReadWholeFile(fifo, 1024),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a FIFO")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_THAT(ReadWholeFile(dir.File("missing"), 1024), StatusIs(absl::StatusCode::kNotFound));
}

TEST(ServerHostileFilesTest, ReadWholeFileReadsAtMostTheLimit) {
  TempDir dir;
  const std::string path = dir.File("f");
  WriteFileOrDie(path, std::string(100, 'a'));
  EXPECT_THAT(ReadWholeFile(path, 100), IsOk());
  EXPECT_EQ(*ReadWholeFile(path, 100), std::string(100, 'a'));
  EXPECT_THAT(ReadWholeFile(path, 99),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("100 bytes; at most 99 are accepted")));
  WriteFileOrDie(path, "");
  EXPECT_EQ(*ReadWholeFile(path, 10), "");
  // A symlink is followed to a regular file like any path.
  std::filesystem::create_symlink(path, dir.File("link"));
  EXPECT_THAT(ReadWholeFile(dir.File("link"), 10), IsOk());
}

}  // namespace
}  // namespace weightpath::server::testing
