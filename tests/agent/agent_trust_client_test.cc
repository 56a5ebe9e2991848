// The agent's TUF client in-process: the `trust` config block, the HTTP
// metadata fetcher against a real loopback server, and TrustClient over an
// in-memory repository with real keys (tests/trust/test_repository.h), on a
// fake clock. The real binary against real repositories is
// agent_trust_e2e_test.cc.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/config/agent_config.h"
#include "agent/signed/metadata_fetcher.h"
#include "agent/signed/trust_client.h"
#include "agent/signed/trust_status.h"
#include "agent/fetch/verified_stamp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/fake_clock.h"
#include "tests/agent/range_http_server.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"
#include "tests/trust/test_repository.h"

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using testing::FakeClock;
using ::testing::HasSubstr;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteTextFile;
using trust::testing::TestNow;
using trust::testing::TestRepository;
using weightpath::testing::IsOk;
using weightpath::testing::IsOkAndHolds;
using weightpath::testing::StatusIs;

namespace fs = std::filesystem;

constexpr char kBase[] = "server: a:1\ndevice_id: d\n";

TEST(AgentTrustConfig, ParsesTheTrustBlock) {
  absl::StatusOr<AgentConfig> config =
      ParseAgentConfig(absl::StrCat(kBase,
                                    "trust:\n  root: /etc/weightpath/root.json\n"
                                    "  metadata_url: https://mirror.example.net/metadata/\n"),
                       "agent.yaml");
  ASSERT_THAT(config, IsOk());
  ASSERT_TRUE(config->trust.has_value());
  EXPECT_EQ(config->trust->root, "/etc/weightpath/root.json");
  EXPECT_EQ(config->trust->metadata_url, "https://mirror.example.net/metadata/");
  EXPECT_FALSE(ParseAgentConfig(kBase, "agent.yaml")->trust.has_value());
}

TEST(AgentTrustConfig, RefusesUnknownKeysAndBadValuesNamingFileAndLine) {
  const struct {
    std::string block;
    std::string line;
    std::string complaint;
  } cases[] = {
      {"trust:\n  root: r.json\n  metadata_url: http://m/\n  roots: x\n", "agent.yaml:6",
       "trust.roots: unknown key 'roots' (allowed: metadata_url, root)"},
      // A missing key is reported at the block (its first line).
      {"trust:\n  root: r.json\n", "agent.yaml:4", "trust.metadata_url: required"},
      {"trust:\n  metadata_url: http://m/\n", "agent.yaml:4", "trust.root: required"},
      {"trust:\n  root: \"\"\n  metadata_url: http://m/\n", "agent.yaml:4",
       "trust.root: must not be empty"},
      {"trust:\n  root: r.json\n  metadata_url: ftp://m/\n", "agent.yaml:5",
       "is not an http:// or https:// URL"},
      {"trust:\n  root: r.json\n  metadata_url: http:///x\n", "agent.yaml:5", "names no host"},
      {"trust:\n  root: r.json\n  metadata_url: \"http://m/?v=1\"\n", "agent.yaml:5",
       "must not have a query or fragment"},
      {"trust:\n  root: r.json\n  metadata_url: \"http://m/a b\"\n", "agent.yaml:5",
       "spaces or control characters"},
      {"trust: /etc/root.json\n", "agent.yaml:3",
       "trust: expected a mapping, got a scalar (keys: metadata_url, root)"},
      {"trust:\n  root: [a]\n  metadata_url: http://m/\n", "agent.yaml:4",
       "trust.root: expected a string, got a list"},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.block);
    EXPECT_THAT(ParseAgentConfig(absl::StrCat(kBase, bad.block), "agent.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(bad.line), HasSubstr(bad.complaint))));
  }
}

// The fetcher against a real HTTP server on loopback.
class AgentMetadataFetcher : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::RangeHttpServer>> http =
        testing::RangeHttpServer::Start(dir_.Sub("served"), dir_.path());
    ASSERT_THAT(http, IsOk());
    http_ = *std::move(http);
    WriteTextFile(dir_.Sub("served/metadata/timestamp.json"), "{\"signed\": 1}");
    WriteTextFile(dir_.Sub("served/metadata/big.json"), std::string(100000, ' '));
  }

  HttpMetadataFetcher Fetcher(absl::Duration left = absl::Seconds(20),
                              absl::Duration call_timeout = absl::Seconds(10)) {
    return HttpMetadataFetcher(http_->Url("metadata/"), &clock_, clock_.MonotonicNow() + left,
                               call_timeout);
  }

  TempDir dir_;
  SystemClock clock_;
  std::unique_ptr<testing::RangeHttpServer> http_;
};

TEST_F(AgentMetadataFetcher, FetchesNamesMissingFilesAndStopsAtTheLimit) {
  HttpMetadataFetcher fetcher = Fetcher();
  EXPECT_EQ(fetcher.UrlFor("timestamp.json"), http_->Url("metadata/timestamp.json"));
  EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
              IsOkAndHolds(std::string("{\"signed\": 1}")));
  EXPECT_THAT(fetcher.Fetch({"root", "2.root.json", 512000}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("answered HTTP 404")));
  EXPECT_THAT(fetcher.Fetch({"timestamp", "big.json", 16384}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("big.json"), HasSubstr("more than the 16384 bytes"),
                             HasSubstr("endless data"))));
  // The connection is reused for the whole update.
  EXPECT_EQ(fetcher.requests(), 3);
}

TEST_F(AgentMetadataFetcher, ASilentMirrorIsCutOffAtTheCallTimeoutAndTheBudget) {
  HttpMetadataFetcher fetcher = Fetcher(absl::Seconds(20), absl::Milliseconds(500));
  const absl::Time start = absl::Now();
  EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json?stall_after=0", 16384}),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("no complete answer")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  HttpMetadataFetcher spent = Fetcher(absl::ZeroDuration());
  EXPECT_THAT(spent.Fetch({"timestamp", "timestamp.json", 16384}),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("no time left")));
}

// TrustClient over an in-memory repository.
class AgentTrustClient : public ::testing::Test {
 protected:
  AgentTrustClient() : clock_(TestNow()) {
    config_.root = dir_.Sub("root.json");
    config_.metadata_url = "http://mirror.invalid/metadata";
    WriteTextFile(config_.root, repository_.files.at("1.root.json"));
    artifact_bytes_ = "int4 weights for this test";
    repository_.AddTarget("models/w4a8-amx.bin", artifact_bytes_, {"x86_cpu"});
  }

  std::unique_ptr<TrustClient> Client() {
    return std::make_unique<TrustClient>(config_, state_dir(), &clock_, [this](MonotonicTime) {
      if (offline_) {
        return trust::MetadataFetcher(
            [](const trust::MetadataRequest& request) -> absl::StatusOr<std::string> {
              return absl::UnavailableError(
                  absl::StrCat(request.file_name, ": connection refused"));
            });
      }
      return repository_.Fetcher();
    });
  }

  v1::Artifact Artifact(const std::string& path = "models/w4a8-amx.bin") const {
    v1::Artifact artifact;
    artifact.set_uri("http://mirror.invalid/" + path);
    artifact.set_target_path(path);
    artifact.set_size_bytes(artifact_bytes_.size());
    artifact.set_sha256(trust::Sha256Hex(artifact_bytes_));
    return artifact;
  }

  std::string state_dir() const { return dir_.Sub("state"); }

  TempDir dir_;
  FakeClock clock_;
  TestRepository repository_;
  TrustConfig config_;
  std::string artifact_bytes_;
  bool offline_ = false;
};

TEST_F(AgentTrustClient, ASignedArtifactPassesAndTheStateIsKeptForTheNextUpdate) {
  std::unique_ptr<TrustClient> client = Client();
  ASSERT_THAT(client->Update(absl::Seconds(10)), IsOk());
  EXPECT_THAT(client->CheckArtifact(Artifact(), "x86_cpu", nullptr), IsOk());
  ASSERT_TRUE(fs::exists(TrustStatePath(state_dir())));
  const std::string state = ReadTextFile(TrustStatePath(state_dir()));
  const fs::file_time_type written = fs::last_write_time(TrustStatePath(state_dir()));

  // Nothing changed upstream: the probe for the next root and the timestamp.
  repository_.requests.clear();
  std::unique_ptr<TrustClient> again = Client();
  ASSERT_THAT(again->Update(absl::Seconds(10)), IsOk());
  std::vector<std::string> fetched;
  for (const trust::MetadataRequest& request : repository_.requests)
    fetched.push_back(request.file_name);
  EXPECT_THAT(fetched, ::testing::ElementsAre("2.root.json", "timestamp.json"));
  EXPECT_THAT(again->CheckArtifact(Artifact(), "x86_cpu", nullptr), IsOk());
  EXPECT_EQ(ReadTextFile(TrustStatePath(state_dir())), state);
  EXPECT_EQ(fs::last_write_time(TrustStatePath(state_dir())), written) << "not rewritten";
}

TEST_F(AgentTrustClient, AStampedStateIsNotVerifiedAgainUntilTheFileChanges) {
  ASSERT_THAT(Client()->Update(absl::Seconds(10)), IsOk());
  // Just written: too recent to stamp (a write in the same ctime tick would
  // go unseen), so the next update verifies everything and stamps it.
  EXPECT_FALSE(fs::exists(TrustStateStampPath(state_dir())));
  absl::SleepFor(absl::Milliseconds(60));
  ASSERT_THAT(Client()->Update(absl::Seconds(10)), IsOk());
  ASSERT_TRUE(fs::exists(TrustStateStampPath(state_dir())));

  absl::StatusOr<LoadedTrust> stamped =
      LoadTrustedState(config_, state_dir(), clock_.Now(), /*use_stamp=*/true);
  ASSERT_THAT(stamped, IsOk());
  EXPECT_TRUE(stamped->verified_when_written);
  std::unique_ptr<TrustClient> client = Client();
  ASSERT_THAT(client->Update(absl::Seconds(10)), IsOk());
  EXPECT_THAT(client->CheckArtifact(Artifact(), "x86_cpu", nullptr), IsOk());
  // `trust status` verifies everything whatever the stamp says.
  absl::StatusOr<LoadedTrust> checked = LoadTrustedState(config_, state_dir(), clock_.Now());
  ASSERT_THAT(checked, IsOk());
  EXPECT_FALSE(checked->verified_when_written);

  // Expiry is still judged: a week on, the stamped timestamp has expired.
  FakeClock later(clock_.Now() + absl::Hours(24 * 8));
  TrustClient stale(config_, state_dir(), &later,
                    [this](MonotonicTime) { return repository_.Fetcher(); });
  EXPECT_THAT(stale.Update(absl::Seconds(10)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("expired")));

  // The same bytes written again: another inode and ctime, so the stamp no
  // longer vouches and the signatures are checked again.
  const std::string state = ReadTextFile(TrustStatePath(state_dir()));
  fs::remove(TrustStatePath(state_dir()));
  WriteTextFile(TrustStatePath(state_dir()), state);
  absl::StatusOr<LoadedTrust> rewritten =
      LoadTrustedState(config_, state_dir(), clock_.Now(), /*use_stamp=*/true);
  ASSERT_THAT(rewritten, IsOk());
  EXPECT_FALSE(rewritten->verified_when_written);
  // Other bytes under a copied stamp: refused by its SHA-256.
  const std::string stamp = ReadTextFile(TrustStateStampPath(state_dir()));
  std::string tampered = state;
  tampered.insert(tampered.rfind('}'), " ");
  WriteTextFile(TrustStatePath(state_dir()), tampered);
  absl::StatusOr<FileIdentity> identity = StatFileIdentity(TrustStatePath(state_dir()));
  ASSERT_THAT(identity, IsOk());
  absl::StatusOr<VerifiedStamp> parsed = ParseStamp(stamp);
  ASSERT_THAT(parsed, IsOk());
  parsed->identity = *identity;
  ASSERT_THAT(WriteStamp(TrustStateStampPath(state_dir()), *parsed), IsOk());
  absl::StatusOr<LoadedTrust> forged =
      LoadTrustedState(config_, state_dir(), clock_.Now(), /*use_stamp=*/true);
  ASSERT_THAT(forged, IsOk());
  EXPECT_FALSE(forged->verified_when_written);
}

TEST_F(AgentTrustClient, RefusesWhatTheTargetsDoNotSayForThisDevice) {
  repository_.AddTarget("models/arm.bin", artifact_bytes_, {"arm64_cpu"});
  std::unique_ptr<TrustClient> client = Client();
  ASSERT_THAT(client->Update(absl::Seconds(10)), IsOk());

  EXPECT_THAT(
      client->CheckArtifact(Artifact("models/rogue.bin"), "x86_cpu", nullptr),
      StatusIs(absl::StatusCode::kPermissionDenied,
               AllOf(HasSubstr("\"models/rogue.bin\" is not listed"), HasSubstr("did not sign"))));
  v1::Artifact other_bytes = Artifact();
  other_bytes.set_sha256(std::string(64, 'a'));
  EXPECT_THAT(client->CheckArtifact(other_bytes, "x86_cpu", nullptr),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("signed sha256")));
  v1::Artifact other_length = Artifact();
  other_length.set_size_bytes(other_length.size_bytes() + 1);
  EXPECT_THAT(client->CheckArtifact(other_length, "x86_cpu", nullptr),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("signed length")));
  EXPECT_THAT(client->CheckArtifact(Artifact("models/arm.bin"), "x86_cpu", nullptr),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("signed for hardware classes arm64_cpu, not x86_cpu")));
  // A name that would forge a log line.
  v1::Artifact forged_log =
      Artifact("models/w4a8-amx.bin\n2026-12-01 info boot: decision from the server");
  EXPECT_THAT(client->CheckArtifact(forged_log, "x86_cpu", nullptr),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       AllOf(HasSubstr("bin\\x0a2026"), HasSubstr("control characters"))));
  v1::Artifact unnamed = Artifact();
  unnamed.clear_target_path();
  EXPECT_THAT(
      client->CheckArtifact(unnamed, "x86_cpu", nullptr),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("artifact.target_path: empty")));
}

TEST_F(AgentTrustClient, TheDevicesOwnClassIsClassifiedFromItsProfile) {
  std::unique_ptr<TrustClient> client = Client();
  ASSERT_THAT(client->Update(absl::Seconds(10)), IsOk());
  v1::HardwareProfile x86;
  x86.set_arch("x86_64");
  x86.set_accelerator("none");
  EXPECT_THAT(CheckArtifactForDevice(*client, Artifact(), x86, nullptr), IsOk());
  v1::HardwareProfile arm = x86;
  arm.set_arch("aarch64");
  EXPECT_THAT(CheckArtifactForDevice(*client, Artifact(), arm, nullptr),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("not arm64_cpu")));
}

TEST_F(AgentTrustClient, OfflineOrExpiredMetadataBlocksOnlyANewArtifact) {
  ASSERT_THAT(Client()->Update(absl::Seconds(10)), IsOk());
  const v1::Artifact installed = Artifact();

  offline_ = true;
  std::unique_ptr<TrustClient> offline = Client();
  EXPECT_THAT(offline->Update(absl::Seconds(10)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("connection refused")));
  v1::Artifact next = Artifact();
  next.set_sha256(std::string(64, 'b'));
  EXPECT_THAT(
      offline->CheckArtifact(next, "x86_cpu", &installed),
      StatusIs(absl::StatusCode::kUnavailable, AllOf(HasSubstr("could not be brought up to date"),
                                                     HasSubstr("no new artifact is installed"))));
  EXPECT_THAT(offline->CheckArtifact(Artifact(), "x86_cpu", &installed), IsOk());

  // Two days on, the mirror still serves the same timestamp (1 day): frozen.
  offline_ = false;
  clock_.Advance(absl::Hours(48));
  std::unique_ptr<TrustClient> frozen = Client();
  EXPECT_THAT(frozen->Update(absl::Seconds(10)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("freeze attack")));
  EXPECT_THAT(frozen->CheckArtifact(next, "x86_cpu", &installed),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("freeze attack")));
  EXPECT_THAT(frozen->CheckArtifact(Artifact(), "x86_cpu", &installed), IsOk());
  EXPECT_THAT(frozen->CheckArtifact(Artifact(), "x86_cpu", nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(AgentTrustClient, AStateThatNoLongerVerifiesFallsBackToTheProvisionedRoot) {
  ASSERT_THAT(Client()->Update(absl::Seconds(10)), IsOk());
  WriteTextFile(TrustStatePath(state_dir()), "{\"format\": \"something else\"}");
  absl::StatusOr<LoadedTrust> loaded = LoadTrustedState(config_, state_dir(), TestNow());
  ASSERT_THAT(loaded, IsOk());
  ASSERT_TRUE(loaded->note.has_value());
  EXPECT_THAT(*loaded->note, AllOf(HasSubstr("no longer verifies"), HasSubstr("trust.root")));
  std::unique_ptr<TrustClient> client = Client();
  ASSERT_THAT(client->Update(absl::Seconds(10)), IsOk());
  EXPECT_THAT(client->CheckArtifact(Artifact(), "x86_cpu", nullptr), IsOk());
  EXPECT_THAT(LoadTrustedState(config_, state_dir(), TestNow())->note, ::testing::Eq(std::nullopt));

  fs::remove(TrustStatePath(state_dir()));
  fs::remove(config_.root);
  std::unique_ptr<TrustClient> lost = Client();
  EXPECT_THAT(lost->Update(absl::Seconds(10)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("trust.root")));
  EXPECT_THAT(lost->CheckArtifact(Artifact(), "x86_cpu", nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("trust.root")));
}

TEST_F(AgentTrustClient, StatusShowsVersionsExpiriesKeysAndNotesWithoutNetwork) {
  absl::StatusOr<trust::Json> before = TrustStatus(config_, state_dir(), TestNow());
  ASSERT_THAT(before, IsOk());
  EXPECT_THAT(trust::CanonicalJson(*before->Find("notes")), HasSubstr("no trusted state yet"));
  EXPECT_TRUE(before->Find("roles")->Find("timestamp")->is_null());

  ASSERT_THAT(Client()->Update(absl::Seconds(10)), IsOk());
  absl::StatusOr<trust::Json> status = TrustStatus(config_, state_dir(), TestNow());
  ASSERT_THAT(status, IsOk());
  const trust::Json& roles = *status->Find("roles");
  EXPECT_EQ(roles.Find("root")->Find("version")->int_value(), 1);
  EXPECT_EQ(roles.Find("timestamp")->Find("version")->int_value(), 2);
  EXPECT_EQ(roles.Find("targets")->Find("version")->int_value(), 2);
  EXPECT_EQ(roles.Find("targets")->Find("target_count")->int_value(), 1);
  EXPECT_EQ(roles.Find("timestamp")->Find("keyids")->array().at(0).string_value(),
            repository_.keys.at("timestamp").at(0).key.keyid);
  EXPECT_TRUE(roles.Find("snapshot")->Find("verified")->bool_value());
  const std::string text = TrustStatusText(*status);
  EXPECT_THAT(text, AllOf(HasSubstr("timestamp  v2  expires "),
                          HasSubstr(repository_.keys.at("targets").at(0).key.keyid)));

  absl::StatusOr<trust::Json> later =
      TrustStatus(config_, state_dir(), TestNow() + absl::Hours(48));
  ASSERT_THAT(later, IsOk());
  EXPECT_TRUE(later->Find("roles")->Find("timestamp")->Find("expired")->bool_value());
  EXPECT_FALSE(later->Find("roles")->Find("snapshot")->Find("verified")->bool_value());
  EXPECT_THAT(trust::CanonicalJson(*later->Find("notes")),
              HasSubstr("no new artifact is installed until a fresh one is fetched"));
  EXPECT_THAT(TrustStatusText(*later), AllOf(HasSubstr("EXPIRED"), HasSubstr("not verified now")));
}

}  // namespace
}  // namespace weightpath::agent
