// The catalog the server answers from, against the real weightpath-server
// binary: the TUF target path a plain YAML catalog may name (sent unsigned),
// and a TUF repository made by the real `weightpathctl repo` in the test,
// verified at start and on every reload, its trusted state persisted, its
// timestamp kept fresh with --timestamp_key.
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "server/config/content_hash.h"
#include "server/config/demo_catalog.h"
#include "server/config/signed_catalog.h"
#include "server/resolve/resolver.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"
#include "trust/metadata.h"

namespace weightpath::server::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;

constexpr char kModel[] = "Spark-X2.5-1.7B";
constexpr char kMirror[] = "http://mirror.test/artifacts";
constexpr absl::Duration kWait = absl::Seconds(30);

absl::StatusOr<double> Scrape(const ServerProcess& server, const std::string& series) {
  absl::StatusOr<std::string> text = HttpGet(server.metrics_address(), "/metrics");
  if (!text.ok()) return text.status();
  return SampleValue(*text, series);
}

bool WaitForSample(const ServerProcess& server, const std::string& series, double at_least) {
  const absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    absl::StatusOr<double> now = Scrape(server, series);
    if (now.ok() && *now >= at_least) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

// A repository as an operator makes one: `weightpathctl repo init`, one
// target per weight path the default policy can return, signed, published.
class SignedRepository : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_.File("repo");
    keys_ = dir_.File("keys");
    state_ = dir_.File("state");
    ProcessResult init = Ctl({"repo", "init", "--repo", repo_, "--generate-keys", keys_});
    ASSERT_EQ(init.exit_code, 0) << init.err;
    for (const std::string& path : policy::DefaultPolicy()->ReachablePathNames()) {
      AddTarget(path, "2026.11.1");
    }
    Publish();
  }

  ProcessResult Ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {WEIGHTPATHCTL_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }

  static std::string TargetPath(const std::string& weight_path) {
    return absl::StrCat("models/spark-x2.5-1.7b/", weight_path, ".bin");
  }
  static std::string FakeSha256(const std::string& weight_path, const std::string& version) {
    return Sha256Hex(absl::StrCat(weight_path, "@", version));
  }

  void AddTarget(const std::string& weight_path, const std::string& version) {
    ProcessResult added = Ctl({"repo", "add-target", "--repo", repo_, "--path",
                               TargetPath(weight_path), "--length", "262144", "--sha256",
                               FakeSha256(weight_path, version), "--model", kModel,
                               "--weight-path", weight_path, "--version", version,
                               "--hardware-classes", "x86_cpu,arm64_cpu", "--replace"});
    ASSERT_EQ(added.exit_code, 0) << added.err;
  }

  // With nothing staged, the published targets are renewed as the next
  // version (`repo sign` wants --expires to do that on purpose).
  void Publish(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> sign = {"repo",   "sign",  "--repo",       repo_,
                                     "--role", "targets", "--key", Key("targets")};
    if (!std::filesystem::exists(repo_ + "/staged/targets.json")) {
      sign.insert(sign.end(), {"--expires", "90d"});
    }
    ProcessResult signed_targets = Ctl(sign);
    ASSERT_EQ(signed_targets.exit_code, 0) << signed_targets.err;
    std::vector<std::string> args = {"repo", "timestamp", "--repo", repo_, "--key",
                                     Key("timestamp"), "--snapshot-key", Key("snapshot")};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessResult published = Ctl(args);
    ASSERT_EQ(published.exit_code, 0) << published.err;
  }

  std::string Key(const std::string& role) const { return keys_ + "/" + role + ".pem"; }
  std::string Metadata(const std::string& name) const { return repo_ + "/metadata/" + name; }

  std::vector<std::string> ServerArgs(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"--catalog=" + repo_,
                                      "--catalog_root=" + Metadata("1.root.json"),
                                      std::string("--catalog_artifact_url=") + kMirror + "/",
                                      "--catalog_state_dir=" + state_};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  int64_t PublishedTimestampVersion() const {
    auto parsed = trust::ParseTimestamp(ReadFileOrDie(Metadata("timestamp.json")), "timestamp.json");
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? parsed->signed_part.version : -1;
  }

  // Replaces a metadata file the way a mirror sync does (write aside, rename).
  void ReplaceMetadata(const std::string& name, const std::string& bytes) {
    const std::string aside = Metadata(name) + ".sync";
    WriteFileOrDie(aside, bytes);
    ASSERT_EQ(std::rename(aside.c_str(), Metadata(name).c_str()), 0);
  }

  // timestamp.json with its one signature altered (still well-formed hex).
  std::string TamperedTimestamp() const {
    std::string bytes = ReadFileOrDie(Metadata("timestamp.json"));
    const size_t sig = bytes.find("\"sig\"");
    EXPECT_NE(sig, std::string::npos);
    const size_t digit = bytes.find('"', bytes.find(':', sig)) + 5;
    bytes[digit] = bytes[digit] == '0' ? '1' : '0';
    return bytes;
  }

  TempDir dir_;
  std::string repo_, keys_, state_;
};

TEST_F(SignedRepository, TheServerAnswersWithTheVerifiedTargets) {
  auto server = ServerProcess::Start(ServerArgs());
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::WeightPath::NewStub(PlaintextChannel((*server)->grpc_address()));
  v1::ResolveWeightPathResponse response;
  grpc::Status status = CallResolve(*stub, AmxRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.weight_path().name(), "w4a8-amx");
  EXPECT_EQ(response.model(), kModel);
  const v1::Artifact& artifact = response.artifact();
  EXPECT_EQ(artifact.target_path(), TargetPath("w4a8-amx"));
  EXPECT_TRUE(artifact.signed_target());
  EXPECT_EQ(artifact.uri(), absl::StrCat(kMirror, "/", TargetPath("w4a8-amx")));
  EXPECT_EQ(artifact.sha256(), FakeSha256("w4a8-amx", "2026.11.1"));
  EXPECT_EQ(artifact.size_bytes(), 262144u);
  EXPECT_EQ(artifact.version(), "2026.11.1");

  EXPECT_EQ(Scrape(**server, "weightpath_catalog_signed").value_or(-1), 1.0);
  absl::StatusOr<double> expires =
      Scrape(**server, "weightpath_catalog_metadata_expires_timestamp_seconds");
  ASSERT_TRUE(expires.ok()) << expires.status();
  EXPECT_GT(*expires, static_cast<double>(absl::ToUnixSeconds(absl::Now())));
  EXPECT_THAT((*server)->Log(), HasSubstr("signed: root v1, targets v2, snapshot v2, timestamp v2"));
  // The trusted state outlives the process, owner-only.
  struct stat info {};
  ASSERT_EQ(stat((state_ + "/catalog-trust-state.json").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 077, 0u);
}

// The fixture signs every build for x86_cpu and arm64_cpu only, while the
// default policy also routes jetson, cuda_discrete and npu_phone devices:
// served (refusing would stop the server for every class), warned about in
// the log and in one series per uncovered route, gone once builds are
// signed for every class the policy sends to them.
TEST_F(SignedRepository, RoutesNoSignedBuildCoversAreWarnedAbout) {
  const std::shared_ptr<const policy::Policy> policy = policy::DefaultPolicy();
  std::vector<std::string> uncovered;
  for (const std::string& path : policy->ReachablePathNames()) {
    for (policy::HardwareClass routed : policy->HardwareClassesRoutedTo(path)) {
      const std::string name(policy::HardwareClassName(routed));
      if (name != "x86_cpu" && name != "arm64_cpu") {
        uncovered.push_back(absl::StrCat("weightpath_catalog_uncovered_routes{hardware_class=\"",
                                         name, "\",model=\"", kModel, "\",weight_path=\"", path,
                                         "\"}"));
      }
    }
  }
  // The analysis is per class: w4a8-amx (AMX) only ever reaches x86 CPUs.
  EXPECT_THAT(policy->HardwareClassesRoutedTo("w4a8-amx"),
              ::testing::ElementsAre(policy::HardwareClass::kX86Cpu));
  ASSERT_FALSE(uncovered.empty());
  {
    auto server = ServerProcess::Start(ServerArgs());
    ASSERT_TRUE(server.ok()) << server.status();
    absl::StatusOr<std::string> text = HttpGet((*server)->metrics_address(), "/metrics");
    ASSERT_TRUE(text.ok()) << text.status();
    for (const std::string& series : uncovered) {
      EXPECT_EQ(SampleValue(*text, series).value_or(-1), 1.0) << series;
    }
    EXPECT_THAT((*server)->Log(),
                AllOf(HasSubstr(absl::StrCat("routes ", uncovered.size(),
                                             " hardware class/weight path pair(s) to a signed "
                                             "target not built for that class")),
                      HasSubstr("jetson -> Spark-X2.5-1.7B")));
  }
  for (const std::string& path : policy->ReachablePathNames()) {
    ProcessResult added = Ctl({"repo", "add-target", "--repo", repo_, "--path", TargetPath(path),
                               "--length", "262144", "--sha256", FakeSha256(path, "2026.11.2"),
                               "--model", kModel, "--weight-path", path, "--version", "2026.11.2",
                               "--hardware-classes",
                               "x86_cpu,arm64_cpu,jetson,cuda_discrete,npu_phone", "--replace"});
    ASSERT_EQ(added.exit_code, 0) << added.err;
  }
  Publish();
  auto covered = ServerProcess::Start(ServerArgs());
  ASSERT_TRUE(covered.ok()) << covered.status();
  absl::StatusOr<std::string> text = HttpGet((*covered)->metrics_address(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, ::testing::Not(HasSubstr("weightpath_catalog_uncovered_routes{")));
  EXPECT_THAT((*covered)->Log(), ::testing::Not(HasSubstr("not built for that class")));
}

// A rollout's pin_artifact names its own build: it is signed only when the
// verified targets list its target_path with exactly its length and
// sha256, never because the rollout says so.
TEST_F(SignedRepository, APinnedArtifactIsSignedOnlyWhenItMatchesAVerifiedTarget) {
  auto source = SignedCatalogSource::Create({repo_, Metadata("1.root.json"), state_,
                                             std::string(kMirror), ""});
  ASSERT_TRUE(source.ok()) << source.status();
  const std::shared_ptr<const policy::Policy> policy = policy::DefaultPolicy();
  absl::StatusOr<std::shared_ptr<const Catalog>> signed_catalog = (*source)->Load(*policy, nullptr);
  ASSERT_TRUE(signed_catalog.ok()) << signed_catalog.status();
  const v1::ResolveWeightPathRequest request = AmxRequest("pinned-device");
  const std::string decided_path = "w4a8-amx";

  const auto pinned_answer = [&](const std::shared_ptr<const Catalog>& catalog,
                                 const v1::Artifact& artifact) {
    v1::Rollout rollout;
    rollout.set_id("pinned-build");
    v1::PinnedArtifact* pin = rollout.mutable_action()->mutable_pin_artifact();
    pin->set_path(decided_path);
    *pin->mutable_artifact() = artifact;
    rollout.add_stages()->set_percent(100);
    rollout.set_state(v1::ROLLOUT_STATE_PROGRESSING);
    ResolveSummary summary;
    v1::ResolveWeightPathResponse response;
    const absl::Status resolved =
        Resolve(request, Snapshot{policy, catalog, ""}, &response, &summary, {rollout});
    EXPECT_TRUE(resolved.ok()) << resolved;
    EXPECT_EQ(response.rollout().rollout_id(), "pinned-build");
    EXPECT_EQ(response.artifact().uri(), artifact.uri());
    return response.artifact();
  };
  v1::Artifact exact;
  exact.set_uri(std::string(kMirror) + "/" + TargetPath(decided_path));
  exact.set_target_path(TargetPath(decided_path));
  exact.set_sha256(FakeSha256(decided_path, "2026.11.1"));
  exact.set_size_bytes(262144);
  exact.set_version("2026.11.1");
  EXPECT_TRUE(pinned_answer(*signed_catalog, exact).signed_target());

  // Claimed signed by the rollout, but not the verified target.
  v1::Artifact claimed = exact;
  claimed.set_signed_target(true);
  v1::Artifact other_sha = claimed;
  other_sha.set_sha256(FakeSha256(decided_path, "rc2"));
  v1::Artifact other_length = claimed;
  other_length.set_size_bytes(262145);
  v1::Artifact unlisted = claimed;
  unlisted.set_target_path("models/spark-x2.5-1.7b/w4a8-amx-rc2.bin");
  v1::Artifact no_target = claimed;
  no_target.clear_target_path();
  for (const v1::Artifact& artifact : {other_sha, other_length, unlisted, no_target}) {
    SCOPED_TRACE(artifact.ShortDebugString());
    EXPECT_FALSE(pinned_answer(*signed_catalog, artifact).signed_target());
  }
  // A plain catalog signs nothing, whatever the pin says.
  absl::StatusOr<std::shared_ptr<const Catalog>> plain =
      LoadCatalog(testing::SingleFileCatalogYaml(), "demo catalog", *policy);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(pinned_answer(*plain, claimed).signed_target());
}

// A canary (custom.canary) is a second build of a path that the catalog
// keeps out of every decision but a pin's; a pin that names it by its
// target path alone gets it as the catalog would send it. A pin the catalog
// cannot honour is refused, naming the rollout, rather than served the
// default build under the rollout's name or a build of another path.
TEST_F(SignedRepository, APinByTargetPathAloneIsServedTheSignedBuildCanariesIncluded) {
  const std::string canary = "models/spark-x2.5-1.7b/w4a8-amx-rc2.bin";
  ProcessResult second = Ctl({"repo", "add-target", "--repo", repo_, "--path", canary,
                              "--length", "262145", "--sha256", FakeSha256("w4a8-amx", "rc2"),
                              "--weight-path", "w4a8-amx", "--version", "rc2",
                              "--hardware-classes", "x86_cpu", "--canary"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  Publish();
  auto source = SignedCatalogSource::Create({repo_, Metadata("1.root.json"), state_,
                                             std::string(kMirror), ""});
  ASSERT_TRUE(source.ok()) << source.status();
  const std::shared_ptr<const policy::Policy> policy = policy::DefaultPolicy();
  absl::StatusOr<std::shared_ptr<const Catalog>> catalog = (*source)->Load(*policy, nullptr);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  // The catalog's w4a8-amx build is still the unmarked one.
  EXPECT_EQ((*catalog)->FindModel(kModel)->at("w4a8-amx").target_path, TargetPath("w4a8-amx"));
  EXPECT_TRUE((*catalog)->trust().signed_builds.at(canary).canary);

  const auto resolve = [&](const std::string& target_path, const std::string& sha256,
                           const std::shared_ptr<const Catalog>& serving,
                           v1::ResolveWeightPathResponse* response) {
    v1::Rollout rollout;
    rollout.set_id("amx-rc2");
    v1::PinnedArtifact* pin = rollout.mutable_action()->mutable_pin_artifact();
    pin->set_path("w4a8-amx");
    pin->mutable_artifact()->set_target_path(target_path);
    pin->mutable_artifact()->set_sha256(sha256);
    rollout.add_stages()->set_percent(100);
    rollout.set_state(v1::ROLLOUT_STATE_PROGRESSING);
    ResolveSummary summary;
    return Resolve(AmxRequest("pinned-device"), Snapshot{policy, serving, ""}, response, &summary,
                   {rollout});
  };
  v1::ResolveWeightPathResponse response;
  ASSERT_TRUE(resolve(canary, "", *catalog, &response).ok());
  EXPECT_EQ(response.rollout().rollout_id(), "amx-rc2");
  EXPECT_EQ(response.artifact().uri(), absl::StrCat(kMirror, "/", canary));
  EXPECT_EQ(response.artifact().sha256(), FakeSha256("w4a8-amx", "rc2"));
  EXPECT_EQ(response.artifact().size_bytes(), 262145u);
  EXPECT_EQ(response.artifact().version(), "rc2");
  EXPECT_TRUE(response.artifact().signed_target());
  ASSERT_TRUE(resolve(canary, FakeSha256("w4a8-amx", "rc2"), *catalog, &response).ok());

  absl::StatusOr<std::shared_ptr<const Catalog>> plain =
      LoadCatalog(testing::SingleFileCatalogYaml(), "demo catalog", *policy);
  ASSERT_TRUE(plain.ok()) << plain.status();
  struct Refusal {
    std::string target_path;
    std::string sha256;
    std::shared_ptr<const Catalog> catalog;
    std::string message;
  };
  for (const Refusal& refusal : std::vector<Refusal>{
           {"models/none.bin", "", *catalog, "is no weightpath target of the verified catalog"},
           {TargetPath("bf16"), "", *catalog,
            "is a build of weight path \"bf16\", not of the pinned \"w4a8-amx\""},
           {canary, FakeSha256("w4a8-amx", "rc3"), *catalog, "is signed with sha256 "},
           {canary, "", *plain, "needs a signed catalog"}}) {
    SCOPED_TRACE(refusal.message);
    const absl::Status status = resolve(refusal.target_path, refusal.sha256, refusal.catalog,
                                        &response);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(), AllOf(HasSubstr("rollout 'amx-rc2' pins target_path"),
                                        HasSubstr(refusal.message)));
  }

  // Two unmarked builds of one path are still one too many.
  ASSERT_EQ(Ctl({"repo", "add-target", "--repo", repo_, "--path", canary, "--length", "262145",
                 "--sha256", FakeSha256("w4a8-amx", "rc2"), "--weight-path", "w4a8-amx",
                 "--version", "rc2", "--hardware-classes", "x86_cpu", "--replace"})
                .exit_code,
            1);
}

TEST_F(SignedRepository, APlainCatalogIsReportedUnsigned) {
  auto server = ServerProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Scrape(**server, "weightpath_catalog_signed").value_or(-1), 0.0);
  EXPECT_FALSE(Scrape(**server, "weightpath_catalog_metadata_expires_timestamp_seconds").ok());
  EXPECT_THAT((*server)->Log(), HasSubstr("unsigned (plain YAML catalog)"));
}

TEST_F(SignedRepository, AnUnverifiableRepositoryIsRefusedAtStart) {
  const std::string good = ReadFileOrDie(Metadata("timestamp.json"));
  struct Case {
    std::string name;
    std::string timestamp;
    std::string message_has;
  };
  std::string unsigned_timestamp = good;
  {
    const size_t open = unsigned_timestamp.find("\"signatures\"");
    const size_t start = unsigned_timestamp.find('[', open);
    const size_t end = unsigned_timestamp.find(']', start);
    unsigned_timestamp.replace(start, end - start + 1, "[]");
  }
  const std::vector<Case> cases = {
      {"bad signature", TamperedTimestamp(), "below threshold"},
      {"below threshold", unsigned_timestamp, "0 of the 1 signatures"},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.name);
    ReplaceMetadata("timestamp.json", test_case.timestamp);
    ExitResult result = ServerProcess::RunToExit(ServerArgs(), kWait);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_THAT(result.log, HasSubstr("cannot start"));
    EXPECT_THAT(result.log, HasSubstr("repository refused: timestamp.json"));
    EXPECT_THAT(result.log, HasSubstr(test_case.message_has));
    ASSERT_FALSE(std::filesystem::exists(state_ + "/catalog-trust-state.json"));
  }
  ReplaceMetadata("timestamp.json", good);

  // A file past the library's limit (endless data).
  std::string huge = good;
  huge.insert(huge.rfind('}'), std::string(20000, ' '));
  ReplaceMetadata("timestamp.json", huge);
  ExitResult oversized = ServerProcess::RunToExit(ServerArgs(), kWait);
  EXPECT_EQ(oversized.exit_code, 1);
  EXPECT_THAT(oversized.log, HasSubstr("timestamp.json"));
  EXPECT_THAT(oversized.log, HasSubstr("16384"));
  ReplaceMetadata("timestamp.json", good);

  // Without the trusted root, nothing can be verified.
  std::vector<std::string> no_root = ServerArgs();
  no_root.erase(no_root.begin() + 1);
  ExitResult missing = ServerProcess::RunToExit(no_root, kWait);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.log, HasSubstr("--catalog_root must name the trusted root.json"));

  // A root that is not this repository's.
  ProcessResult other = Ctl({"repo", "init", "--repo", dir_.File("other"), "--generate-keys",
                             dir_.File("other-keys")});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  std::vector<std::string> foreign = ServerArgs();
  foreign[1] = "--catalog_root=" + dir_.File("other") + "/metadata/1.root.json";
  ExitResult stranger = ServerProcess::RunToExit(foreign, kWait);
  EXPECT_EQ(stranger.exit_code, 1);
  EXPECT_THAT(stranger.log, HasSubstr("repository refused"));

  // And the good one starts.
  auto server = ServerProcess::Start(ServerArgs());
  EXPECT_TRUE(server.ok()) << server.status();
}

TEST_F(SignedRepository, AnExpiredTimestampIsRefusedAtStart) {
  Publish({"--expires", "2s"});
  absl::SleepFor(absl::Seconds(3));
  ExitResult result = ServerProcess::RunToExit(ServerArgs(), kWait);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.log, HasSubstr("timestamp.json"));
  EXPECT_THAT(result.log, HasSubstr("expired at"));
  EXPECT_THAT(result.log, HasSubstr("freeze attack"));
}

TEST_F(SignedRepository, ARestartCannotBeRolledBackBelowThePersistedState) {
  // What a mirror held before the next publish.
  const std::string old_timestamp = ReadFileOrDie(Metadata("timestamp.json"));
  Publish();  // snapshot and timestamp v3
  {
    auto server = ServerProcess::Start(ServerArgs());
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_THAT((*server)->Log(), HasSubstr("timestamp v3"));
  }
  // The old timestamp is validly signed, just older than what was trusted.
  ReplaceMetadata("timestamp.json", old_timestamp);
  ExitResult result = ServerProcess::RunToExit(ServerArgs(), kWait);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.log, HasSubstr("timestamp.json"));
  EXPECT_THAT(result.log, HasSubstr("(rollback)"));
  // A server without the persisted state would have taken it: the state is
  // what refused it.
  std::vector<std::string> fresh = ServerArgs();
  fresh.back() = "--catalog_state_dir=" + dir_.File("fresh-state");
  auto unprotected = ServerProcess::Start(fresh);
  EXPECT_TRUE(unprotected.ok()) << unprotected.status();
}

TEST_F(SignedRepository, AReloadRefusesATamperedRepositoryAndKeepsTheLastGoodCatalog) {
  auto server = ServerProcess::Start(ServerArgs({"--reload_interval=0"}));
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::WeightPath::NewStub(PlaintextChannel((*server)->grpc_address()));
  const std::string good = ReadFileOrDie(Metadata("timestamp.json"));

  ReplaceMetadata("timestamp.json", TamperedTimestamp());
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(WaitForSample(**server, "weightpath_policy_reloads_total{result=\"error\"}", 1));
  EXPECT_THAT((*server)->Log(), HasSubstr("repository refused: timestamp.json"));
  v1::ResolveWeightPathResponse response;
  grpc::Status status = CallResolve(*stub, AmxRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.artifact().version(), "2026.11.1");
  EXPECT_TRUE(response.artifact().signed_target());

  // A validly signed but older timestamp (a mirror rolled back).
  ReplaceMetadata("timestamp.json", good);
  Publish();  // targets, snapshot and timestamp v3
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(WaitForSample(**server, "weightpath_policy_reloads_total{result=\"success\"}", 1));
  const std::string current = ReadFileOrDie(Metadata("timestamp.json"));
  ReplaceMetadata("timestamp.json", good);
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(WaitForSample(**server, "weightpath_policy_reloads_total{result=\"error\"}", 2));
  EXPECT_THAT((*server)->Log(), HasSubstr("(rollback)"));
  ReplaceMetadata("timestamp.json", current);

  // A properly signed new version is taken.
  AddTarget("w4a8-amx", "2026.12.0");
  Publish();
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(WaitForSample(**server, "weightpath_policy_reloads_total{result=\"success\"}", 2));
  status = CallResolve(*stub, AmxRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.artifact().version(), "2026.12.0");
  EXPECT_EQ(response.artifact().sha256(), FakeSha256("w4a8-amx", "2026.12.0"));
  EXPECT_EQ(Scrape(**server, "weightpath_policy_reloads_total{result=\"error\"}").value_or(-1), 2.0);
}

TEST_F(SignedRepository, TheTimestampKeyKeepsTheTimestampFresh) {
  Publish({"--expires", "4s"});
  const int64_t first = PublishedTimestampVersion();
  auto server = ServerProcess::Start(
      ServerArgs({"--timestamp_key=" + Key("timestamp"), "--timestamp_lifetime=4s"}));
  ASSERT_TRUE(server.ok()) << server.status();
  // Re-signed once less than half the lifetime is left: about every 2 s.
  ASSERT_TRUE(WaitForSample(**server, "weightpath_timestamp_signatures_total{result=\"success\"}", 3))
      << (*server)->Log();
  EXPECT_GE(PublishedTimestampVersion(), first + 3);
  EXPECT_EQ(Scrape(**server, "weightpath_timestamp_signatures_total{result=\"error\"}").value_or(-1), 0.0);
  // What the server wrote is what a device accepts.
  ProcessResult verified = Ctl({"repo", "verify", "--repo", repo_});
  EXPECT_EQ(verified.exit_code, 0) << verified.err;
  auto stub = v1::WeightPath::NewStub(PlaintextChannel((*server)->grpc_address()));
  v1::ResolveWeightPathResponse response;
  grpc::Status status = CallResolve(*stub, AmxRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(response.artifact().signed_target());
  // The key never reaches the log.
  const std::string pem = ReadFileOrDie(Key("timestamp"));
  const std::string body = pem.substr(pem.find('\n') + 1, 40);
  EXPECT_THAT((*server)->Log(), ::testing::Not(HasSubstr(body)));

  // Down for longer than the lifetime: the start renews the expired timestamp.
  (*server)->Signal(SIGTERM);
  (*server)->WaitForExit(kWait);
  absl::SleepFor(absl::Seconds(5));
  ProcessResult stale = Ctl({"repo", "verify", "--repo", repo_});
  EXPECT_NE(stale.exit_code, 0);
  auto restarted = ServerProcess::Start(
      ServerArgs({"--timestamp_key=" + Key("timestamp"), "--timestamp_lifetime=1h"}));
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(Ctl({"repo", "verify", "--repo", repo_}).exit_code, 0);
}

TEST_F(SignedRepository, ATimestampKeyOthersCanReadOrThatIsNotTheRolesIsRefused) {
  ASSERT_EQ(chmod(Key("timestamp").c_str(), 0644), 0);
  ExitResult readable =
      ServerProcess::RunToExit(ServerArgs({"--timestamp_key=" + Key("timestamp")}), kWait);
  EXPECT_EQ(readable.exit_code, 1);
  EXPECT_THAT(readable.log, HasSubstr("mode 0644 lets group or others reach a private key"));
  ASSERT_EQ(chmod(Key("timestamp").c_str(), 0600), 0);

  ExitResult wrong =
      ServerProcess::RunToExit(ServerArgs({"--timestamp_key=" + Key("snapshot")}), kWait);
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.log, HasSubstr("is not a timestamp key of the trusted root v1"));

  // Only with a repository.
  ExitResult plain = ServerProcess::RunToExit({"--timestamp_key=" + Key("timestamp")}, kWait);
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_THAT(plain.log, HasSubstr("--timestamp_key needs --catalog to be a TUF repository"));
}

TEST(ServerSignedCatalogTest, APlainCatalogSendsItsTargetPathUnsigned) {
  TempDir dir;
  std::string text = testing::SingleFileCatalogYaml();
  const std::string amx = "Spark-X2.5-1.7B/w4a8-amx.bin\n";
  const size_t at = text.find(amx);
  ASSERT_NE(at, std::string::npos);
  text.insert(at + amx.size(), "      target_path: models/spark-x2.5-1.7b/w4a8-amx.bin\n");
  WriteFileOrDie(dir.File("catalog.yaml"), text);

  auto server = ServerProcess::Start({"--catalog=" + dir.File("catalog.yaml")});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::WeightPath::NewStub(PlaintextChannel((*server)->grpc_address()));
  v1::ResolveWeightPathResponse response;
  grpc::Status status = CallResolve(*stub, AmxRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.weight_path().name(), "w4a8-amx");
  EXPECT_EQ(response.artifact().target_path(), "models/spark-x2.5-1.7b/w4a8-amx.bin");
  EXPECT_FALSE(response.artifact().signed_target());

  // A path without one sends none.
  v1::ResolveWeightPathRequest arm = AmxRequest("device-arm");
  arm.mutable_profile()->set_arch("aarch64");
  arm.mutable_profile()->clear_cpu_flags();
  arm.mutable_profile()->set_cpu_model("Cortex-A78");
  v1::ResolveWeightPathResponse arm_response;
  status = CallResolve(*stub, arm, &arm_response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(arm_response.weight_path().name(), "w4a8-amx");
  EXPECT_EQ(arm_response.artifact().target_path(), "");
  EXPECT_FALSE(arm_response.artifact().signed_target());
}

}  // namespace
}  // namespace weightpath::server::testing

namespace weightpath::server::testing {
namespace {

TEST(ServerSignedCatalogTest, HelpListsTheRepositoryFlags) {
  const ::weightpath::testing::ProcessResult help =
      ::weightpath::testing::RunProcess({WEIGHTPATH_SERVER_BINARY, "--help"});
  const std::string text = help.out + help.err;
  for (const char* flag : {"--catalog_root", "--catalog_artifact_url", "--catalog_default_model",
                           "--catalog_state_dir", "--timestamp_key", "--timestamp_lifetime"}) {
    EXPECT_THAT(text, HasSubstr(flag));
  }
  EXPECT_THAT(text, HasSubstr("or a TUF repository"));
}

}  // namespace
}  // namespace weightpath::server::testing
