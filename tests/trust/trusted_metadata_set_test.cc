// The client workflow against every attack TUF defends from, at the
// metadata level: each is refused with the file, the reason and the attack
// named, and what was trusted before stays trusted.
#include "trust/trusted_metadata_set.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/trust/test_repository.h"
#include "trust/client.h"
#include "trust/json.h"

namespace weightpath::trust {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;
using testing::NewKey;
using testing::Sign;
using testing::TestNow;
using testing::TestRepository;

std::vector<std::string> FileNames(const std::vector<MetadataRequest>& requests) {
  std::vector<std::string> names;
  for (const MetadataRequest& request : requests) names.push_back(request.file_name);
  return names;
}

// A device that refreshed once against `repository` and persisted what it
// trusted, as an agent does between boots.
std::string RefreshedState(TestRepository& repository) {
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  EXPECT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()), IsOk());
  return client->SerializeTrusted();
}

absl::StatusOr<RefreshReport> RefreshFromState(TestRepository& repository,
                                               const std::string& state,
                                               absl::Time now = TestNow()) {
  absl::StatusOr<TrustedMetadataSet> client = TrustedMetadataSet::Restore(state, now);
  if (!client.ok()) return client.status();
  return RefreshMetadata(*client, repository.Fetcher());
}

TEST(TrustWorkflowTest, FindsASignedTargetWithItsCustomFields) {
  TestRepository repository;
  repository.AddTarget("models/spark/w4a8-amx.bin", "weights", {"x86_cpu", "arm64_cpu"});
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  absl::StatusOr<RefreshReport> report = RefreshMetadata(*client, repository.Fetcher());
  ASSERT_THAT(report, IsOk());
  // Consistent snapshots: versioned snapshot and targets, probing for root 2.
  EXPECT_THAT(FileNames(repository.requests),
              ElementsAre("2.root.json", "timestamp.json", "2.snapshot.json", "2.targets.json"));
  EXPECT_EQ(repository.requests[1].max_bytes, 16'384);
  // The snapshot's limit is the exact length the timestamp gives.
  EXPECT_EQ(repository.requests[2].max_bytes,
            static_cast<int64_t>(repository.files.at("2.snapshot.json").size()));

  absl::StatusOr<TargetInfo> target = FindTarget(*client, "models/spark/w4a8-amx.bin");
  ASSERT_THAT(target, IsOk());
  EXPECT_EQ(target->file.length, 7);
  EXPECT_EQ(target->sha256, Sha256Hex("weights"));
  EXPECT_EQ(target->role, "targets");
  absl::StatusOr<WeightpathTarget> custom = ParseWeightpathTarget(*target);
  ASSERT_THAT(custom, IsOk());
  EXPECT_EQ(custom->model, "spark-1.7b");
  EXPECT_EQ(custom->weight_path, "w4a8-amx");
  EXPECT_THAT(custom->hardware_classes, ElementsAre("x86_cpu", "arm64_cpu"));

  EXPECT_THAT(CheckArtifactAgainstTarget(*target, 7, Sha256Hex("weights"), "arm64_cpu"), IsOk());
  EXPECT_THAT(CheckArtifactAgainstTarget(*target, 8, Sha256Hex("weights"), "x86_cpu"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("signed length 7")));
  EXPECT_THAT(CheckArtifactAgainstTarget(*target, 7, Sha256Hex("other"), "x86_cpu"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("signed sha256")));
  EXPECT_THAT(CheckArtifactAgainstTarget(*target, 7, Sha256Hex("weights"), "jetson"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("signed for hardware classes x86_cpu, arm64_cpu, not jetson")));
  EXPECT_THAT(FindTarget(*client, "models/unlisted.bin"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("not listed")));
}

TEST(TrustWorkflowTest, WithoutConsistentSnapshotsFetchesPlainNames) {
  TestRepository repository;
  repository.root.consistent_snapshot = false;
  repository.files.clear();
  repository.PublishRoot();
  repository.PublishTargets();
  repository.PublishSnapshotAndTimestamp();
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(RefreshMetadata(*client, repository.Fetcher()), IsOk());
  EXPECT_THAT(FileNames(repository.requests),
              ElementsAre("2.root.json", "timestamp.json", "snapshot.json", "targets.json"));
}

TEST(TrustWorkflowTest, UnchangedTimestampUsesThePersistedCopies) {
  TestRepository repository;
  repository.AddTarget("a.bin", "a");
  const std::string state = RefreshedState(repository);
  repository.requests.clear();
  absl::StatusOr<TrustedMetadataSet> client = TrustedMetadataSet::Restore(state, TestNow());
  ASSERT_THAT(client, IsOk());
  absl::StatusOr<RefreshReport> report = RefreshMetadata(*client, repository.Fetcher());
  ASSERT_THAT(report, IsOk());
  EXPECT_TRUE(report->timestamp_unchanged);
  EXPECT_THAT(FileNames(repository.requests), ElementsAre("2.root.json", "timestamp.json"));
  EXPECT_THAT(FindTarget(*client, "a.bin"), IsOk());
  EXPECT_THAT(client->notes(), IsEmpty());

  // A new targets version: the old persisted snapshot is the rollback
  // reference, and the new files are downloaded.
  repository.AddTarget("b.bin", "b");
  repository.requests.clear();
  absl::StatusOr<TrustedMetadataSet> next = TrustedMetadataSet::Restore(state, TestNow());
  ASSERT_THAT(next, IsOk());
  ASSERT_THAT(RefreshMetadata(*next, repository.Fetcher()), IsOk());
  EXPECT_THAT(FileNames(repository.requests),
              ElementsAre("2.root.json", "timestamp.json", "3.snapshot.json", "3.targets.json"));
  EXPECT_THAT(FindTarget(*next, "b.bin"), IsOk());
  // The persisted targets v2 was superseded, as every update supersedes it:
  // no note (the agent logs each; this one read "... (mix-and-match, or the
  // file was replaced)").
  EXPECT_THAT(next->notes(), IsEmpty());
  // Nor from a state its caller vouches for, as the agent's is, where the
  // version check finds the copy older ("... names version 3 (rollback)").
  absl::StatusOr<TrustedMetadataSet> vouched = TrustedMetadataSet::Restore(
      state, TestNow(), {}, PersistedState::kVerifiedWhenWritten);
  ASSERT_THAT(vouched, IsOk());
  ASSERT_THAT(RefreshMetadata(*vouched, repository.Fetcher()), IsOk());
  EXPECT_THAT(FindTarget(*vouched, "b.bin"), IsOk());
  EXPECT_THAT(vouched->notes(), IsEmpty());
}

// Rollback: a mirror replays files that were once validly signed.
TEST(TrustAttackTest, TimestampRollbackIsRefused) {
  TestRepository repository;
  const std::string old_timestamp = repository.files.at("timestamp.json");
  repository.AddTarget("a.bin", "a");
  const std::string state = RefreshedState(repository);
  repository.files["timestamp.json"] = old_timestamp;
  EXPECT_THAT(RefreshFromState(repository, state),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("timestamp.json: version 1 is older than the trusted 2 (rollback)")));
}

TEST(TrustAttackTest, SnapshotRollbackThroughTheTimestampIsRefused) {
  TestRepository repository;
  repository.AddTarget("a.bin", "a");
  const std::string state = RefreshedState(repository);  // snapshot v2 trusted
  // The online timestamp key signs a newer timestamp naming snapshot v1.
  Timestamp forged = repository.timestamp;
  forged.version = 10;
  forged.snapshot_meta = DescribeMetadataFile(repository.files.at("1.snapshot.json"), 1);
  repository.files["timestamp.json"] = Sign(forged, repository.Signers("timestamp"));
  EXPECT_THAT(RefreshFromState(repository, state),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("timestamp.json: names snapshot version 1, older than the trusted "
                                 "2 (rollback)")));
}

TEST(TrustAttackTest, TargetsRollbackThroughTheSnapshotIsRefused) {
  TestRepository repository;
  repository.AddTarget("a.bin", "a");
  const std::string state = RefreshedState(repository);  // targets v2 trusted
  // Timestamp and snapshot keys sign a new snapshot listing targets v1.
  Snapshot forged = repository.snapshot;
  forged.version = 3;
  forged.meta["targets.json"] = DescribeMetadataFile(repository.files.at("1.targets.json"), 1);
  repository.files["3.snapshot.json"] = Sign(forged, repository.Signers("snapshot"));
  Timestamp timestamp = repository.timestamp;
  timestamp.version = 3;
  timestamp.snapshot_meta = DescribeMetadataFile(repository.files.at("3.snapshot.json"), 3);
  repository.files["timestamp.json"] = Sign(timestamp, repository.Signers("timestamp"));
  EXPECT_THAT(RefreshFromState(repository, state),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("3.snapshot.json: targets.json version 1 is older than the trusted "
                                 "2 (rollback)")));
}

TEST(TrustAttackTest, OlderTargetsThanTheSnapshotNamesAreRefused) {
  TestRepository repository;
  repository.AddTarget("a.bin", "a");
  // A snapshot entry without length and hashes leaves only the version to
  // catch an old targets file served under the new name.
  repository.snapshot.meta["targets.json"] = MetaFile{2, std::nullopt, {}, {}};
  repository.snapshot.version = 2;
  repository.files["2.snapshot.json"] = Sign(repository.snapshot, repository.Signers("snapshot"));
  repository.timestamp.snapshot_meta =
      DescribeMetadataFile(repository.files["2.snapshot.json"], 2);
  repository.files["timestamp.json"] = Sign(repository.timestamp, repository.Signers("timestamp"));
  repository.files["2.targets.json"] = repository.files.at("1.targets.json");
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("2.targets.json: version 1, but snapshot.json v2 names version 2 "
                                 "(rollback)")));
}

// Freeze: a mirror keeps serving metadata that is no longer current.
TEST(TrustAttackTest, ExpiredTimestampIsRefused) {
  TestRepository repository;
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient(TestNow() + absl::Hours(25));
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("timestamp.json: version 1 expired at")));
  // The expired, newer timestamp is still the rollback reference.
  ASSERT_NE(client->timestamp(), nullptr);
  EXPECT_EQ(client->timestamp()->signed_part.version, 1);
  EXPECT_THAT(client->UpdateSnapshot(repository.files.at("1.snapshot.json")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("freeze attack")));
}

TEST(TrustAttackTest, ExpiredTimestampIsRefusedEvenWhenUnchanged) {
  TestRepository repository;
  const std::string state = RefreshedState(repository);
  EXPECT_THAT(RefreshFromState(repository, state, TestNow() + absl::Hours(25)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("timestamp.json: version 1 expired at")));
}

TEST(TrustAttackTest, ExpiredSnapshotTargetsAndRootAreRefused) {
  {
    TestRepository repository;
    repository.timestamp.expires = TestNow() + absl::Hours(24 * 30);
    repository.snapshot.version = 0;
    repository.timestamp.version = 0;
    repository.PublishSnapshotAndTimestamp();
    absl::StatusOr<TrustedMetadataSet> client = repository.NewClient(TestNow() + absl::Hours(24 * 8));
    ASSERT_THAT(client, IsOk());
    EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("1.snapshot.json: version 1 expired at")));
  }
  {
    TestRepository repository;
    repository.targets.expires = TestNow() + absl::Hours(1);
    ++repository.targets.version;
    repository.PublishTargets();
    repository.PublishSnapshotAndTimestamp();
    absl::StatusOr<TrustedMetadataSet> client = repository.NewClient(TestNow() + absl::Hours(2));
    ASSERT_THAT(client, IsOk());
    EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("2.targets.json: version 2 expired at")));
  }
  {
    TestRepository repository;
    absl::StatusOr<TrustedMetadataSet> client =
        repository.NewClient(TestNow() + absl::Hours(24 * 366));
    ASSERT_THAT(client, IsOk());  // an expired initial root is still a starting point
    EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("root.json: version 1 expired at")));
  }
}

// Mix and match: files from different states of the repository.
TEST(TrustAttackTest, SnapshotThatIsNotTheTimestampsIsRefused) {
  TestRepository repository;
  const std::string first_snapshot = repository.files.at("1.snapshot.json");
  repository.AddTarget("a.bin", "a");
  // The mirror serves the older snapshot under the new name.
  repository.files["2.snapshot.json"] = first_snapshot;
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("2.snapshot.json: ")));

  // Without hashes in the timestamp, the version still has to match.
  repository.timestamp.snapshot_meta = MetaFile{2, std::nullopt, {}, {}};
  ++repository.timestamp.version;
  repository.files["timestamp.json"] = Sign(repository.timestamp, repository.Signers("timestamp"));
  absl::StatusOr<TrustedMetadataSet> second = repository.NewClient();
  ASSERT_THAT(second, IsOk());
  EXPECT_THAT(RefreshMetadata(*second, repository.Fetcher()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("2.snapshot.json: version 1, but timestamp.json v3 names snapshot "
                                 "version 2 (mix-and-match)")));
}

TEST(TrustAttackTest, SnapshotWithOtherBytesThanTheTimestampListsIsRefused) {
  TestRepository repository;
  repository.AddTarget("a.bin", "a");
  // Same version, validly signed, different content (a compromised snapshot
  // key): the timestamp's hash and length pin the exact file.
  Snapshot other = repository.snapshot;
  other.expires += absl::Seconds(1);  // same length, other bytes
  repository.files["2.snapshot.json"] = Sign(other, repository.Signers("snapshot"));
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  absl::Status status = RefreshMetadata(*client, repository.Fetcher()).status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("but timestamp.json v2 lists")));
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("(mix-and-match, or the file was replaced)")));
}

// Endless data: a mirror sending more than any metadata file can be.
TEST(TrustAttackTest, OversizedMetadataIsRefused) {
  TestRepository repository;
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  const std::string huge(20'000, ' ');
  EXPECT_THAT(client->UpdateTimestamp(repository.files.at("timestamp.json") + huge),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("timestamp.json: 20")));
  EXPECT_THAT(client->UpdateTimestamp(repository.files.at("timestamp.json") + huge),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("(endless data")));

  // Limits are the caller's: a 100-byte timestamp limit refuses the real one.
  MetadataLimits tight;
  tight.timestamp_max_bytes = 100;
  absl::StatusOr<TrustedMetadataSet> limited = repository.NewClient(TestNow(), tight);
  ASSERT_THAT(limited, IsOk());
  EXPECT_EQ(limited->TimestampRequest().max_bytes, 100);
  EXPECT_THAT(RefreshMetadata(*limited, repository.Fetcher()),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("timestamp.json")));

  // A snapshot longer than the timestamp says is refused by length before
  // it is parsed.
  absl::StatusOr<TrustedMetadataSet> third = repository.NewClient();
  ASSERT_THAT(third, IsOk());
  ASSERT_THAT(third->UpdateTimestamp(repository.files.at("timestamp.json")), IsOk());
  EXPECT_THAT(third->UpdateSnapshot(repository.files.at("1.snapshot.json") + " "),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("1.snapshot.json")));
}

TEST(TrustAttackTest, SignaturesBelowThresholdAreRefused) {
  TestRepository repository;
  repository.keys["targets"].push_back(NewKey("targets-2"));
  repository.SetRoleKeys("targets", 2);
  ++repository.root.version;
  repository.PublishRoot();
  // Only one of the two targets keys signs.
  ++repository.targets.version;
  repository.files["2.targets.json"] = Sign(repository.targets, {&repository.keys["targets"][0]});
  repository.PublishSnapshotAndTimestamp();
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       HasSubstr("2.targets.json: 1 of the 2 signatures required from the targets "
                                 "keys of root v2 (below threshold)")));
}

TEST(TrustAttackTest, SignatureByAKeyOfAnotherRoleDoesNotCount) {
  TestRepository repository;
  ++repository.targets.version;
  repository.files["2.targets.json"] = Sign(repository.targets, repository.Signers("timestamp"));
  repository.PublishSnapshotAndTimestamp();
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("0 of the 1 signatures")));
}

TEST(TrustAttackTest, TamperedSignedContentIsRefused) {
  TestRepository repository;
  repository.AddTarget("a.bin", "a");
  std::string& targets = repository.files["2.targets.json"];
  const size_t at = targets.find("\"length\": 1");
  ASSERT_NE(at, std::string::npos);
  targets.replace(at, 11, "\"length\": 2");
  // Re-list it in snapshot and timestamp so only the signature can catch it.
  repository.snapshot.meta["targets.json"] = DescribeMetadataFile(targets, 2);
  repository.files["2.snapshot.json"] = Sign(repository.snapshot, repository.Signers("snapshot"));
  repository.timestamp.snapshot_meta = DescribeMetadataFile(repository.files["2.snapshot.json"], 2);
  repository.files["timestamp.json"] = Sign(repository.timestamp, repository.Signers("timestamp"));
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("bad signature")));
}

TEST(TrustRootRotationTest, RotationSignedOnlyByTheNewKeysIsRefused) {
  TestRepository repository;
  repository.keys["root"] = {NewKey("attacker-root")};
  repository.SetRoleKeys("root", 1);
  repository.root.version = 2;
  repository.PublishRoot();  // signed by the new key alone
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       HasSubstr("2.root.json: 0 of the 1 signatures required from the root keys "
                                 "of root v1")));
  EXPECT_EQ(client->root().signed_part.version, 1);
}

TEST(TrustRootRotationTest, RotationSignedOnlyByTheOldKeysIsRefused) {
  TestRepository repository;
  std::vector<SigningKey> old_keys = repository.keys["root"];
  repository.keys["root"] = {NewKey("new-root")};
  repository.SetRoleKeys("root", 1);
  repository.root.version = 2;
  repository.files["2.root.json"] =
      Sign(repository.root, std::vector<const SigningKey*>{&old_keys[0]});
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       HasSubstr("2.root.json (its own keys): 0 of the 1 signatures")));
}

TEST(TrustRootRotationTest, RotationsWithBothThresholdsAreFollowed) {
  TestRepository repository;
  // v2: three root keys, threshold 2; signed by the old key and two new ones.
  std::vector<SigningKey> old_keys = repository.keys["root"];
  repository.keys["root"] = {NewKey("root-a"), NewKey("root-b"), NewKey("root-c")};
  repository.SetRoleKeys("root", 2);
  repository.root.version = 2;
  repository.files["2.root.json"] = Sign(
      repository.root, {&old_keys[0], &repository.keys["root"][0], &repository.keys["root"][1]});
  // v3: the same keys, signed by b and c (2 of 3 of v2 and of v3).
  repository.root.version = 3;
  repository.root.expires = TestNow() + absl::Hours(24 * 400);
  repository.files["3.root.json"] =
      Sign(repository.root, {&repository.keys["root"][1], &repository.keys["root"][2]});
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  absl::StatusOr<RefreshReport> report = RefreshMetadata(*client, repository.Fetcher());
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->root_version_before, 1);
  EXPECT_EQ(report->root_version, 3);

  // v4 with one signature: below the threshold of 2, and the chain stops.
  repository.root.version = 4;
  repository.files["4.root.json"] = Sign(repository.root, {&repository.keys["root"][0]});
  absl::StatusOr<TrustedMetadataSet> again = repository.NewClient();
  ASSERT_THAT(again, IsOk());
  EXPECT_THAT(RefreshMetadata(*again, repository.Fetcher()),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       HasSubstr("4.root.json: 1 of the 2 signatures required from the root keys "
                                 "of root v3")));
}

TEST(TrustRootRotationTest, SkippedOrRepeatedRootVersionsAreRefused) {
  TestRepository repository;
  repository.root.version = 3;  // served as 2.root.json
  repository.files["2.root.json"] = Sign(repository.root, repository.Signers("root"));
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(RefreshMetadata(*client, repository.Fetcher()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("2.root.json: version 3, expected 2")));
}

TEST(TrustRootRotationTest, RootCannotChangeAfterTheTimestamp) {
  TestRepository repository;
  absl::StatusOr<TrustedMetadataSet> client = repository.NewClient();
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(client->UpdateTimestamp(repository.files.at("timestamp.json")), IsOk());
  repository.root.version = 2;
  repository.PublishRoot();
  EXPECT_THAT(client->UpdateRoot(repository.files.at("2.root.json")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("workflow order")));
}

// Fast-forward recovery: a compromised timestamp key pushed a device's
// trusted timestamp far ahead; the operators rotate the key and start again
// from low version numbers, and the device follows.
TEST(TrustRootRotationTest, RotatedTimestampKeyRecoversFromAFastForward) {
  TestRepository repository;
  Timestamp fast_forward = repository.timestamp;
  fast_forward.version = 1000;
  repository.files["timestamp.json"] = Sign(fast_forward, repository.Signers("timestamp"));
  const std::string state = RefreshedState(repository);

  // Without a rotation the honest timestamp v2 is a rollback.
  repository.timestamp.version = 1;
  repository.PublishSnapshotAndTimestamp();
  EXPECT_THAT(RefreshFromState(repository, state),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("timestamp.json: version 2 is older than the trusted 1000 (rollback)")));

  // Root v2 rotates the timestamp key.
  repository.keys["timestamp"] = {NewKey("timestamp-2")};
  repository.SetRoleKeys("timestamp", 1);
  repository.root.version = 2;
  repository.PublishRoot();
  repository.timestamp.version = 1;
  repository.PublishSnapshotAndTimestamp();
  absl::StatusOr<TrustedMetadataSet> client = TrustedMetadataSet::Restore(state, TestNow());
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(RefreshMetadata(*client, repository.Fetcher()), IsOk());
  EXPECT_EQ(client->timestamp()->signed_part.version, 2);
  EXPECT_THAT(client->notes(),
              ElementsAre(HasSubstr("root v2 changed the timestamp keys: the persisted timestamp "
                                    "and snapshot are dropped (fast-forward recovery)")));
}

TEST(TrustRootRotationTest, RotatedSnapshotKeyRecoversFromAFastForward) {
  TestRepository repository;
  // A compromised snapshot key lists targets at version 500.
  Snapshot fast_forward = repository.snapshot;
  fast_forward.version = 2;
  Targets targets = repository.targets;
  targets.version = 500;
  repository.files["500.targets.json"] = Sign(targets, repository.Signers("targets"));
  fast_forward.meta["targets.json"] = DescribeMetadataFile(repository.files["500.targets.json"], 500);
  repository.files["2.snapshot.json"] = Sign(fast_forward, repository.Signers("snapshot"));
  repository.timestamp.version = 2;
  repository.timestamp.snapshot_meta = DescribeMetadataFile(repository.files["2.snapshot.json"], 2);
  repository.files["timestamp.json"] = Sign(repository.timestamp, repository.Signers("timestamp"));
  const std::string state = RefreshedState(repository);

  repository.keys["snapshot"] = {NewKey("snapshot-2")};
  repository.SetRoleKeys("snapshot", 1);
  repository.root.version = 2;
  repository.PublishRoot();
  repository.targets.version = 2;
  repository.PublishTargets();
  repository.snapshot.version = 2;  // -> 3
  repository.PublishSnapshotAndTimestamp();
  absl::StatusOr<TrustedMetadataSet> client = TrustedMetadataSet::Restore(state, TestNow());
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(RefreshMetadata(*client, repository.Fetcher()), IsOk());
  EXPECT_EQ(client->targets()->signed_part.version, 2);
}

class TrustDelegationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    team_key_ = NewKey("ml-team");
    Delegations delegations;
    delegations.keys.emplace(team_key_.key.keyid, team_key_.key);
    DelegatedRole team;
    team.name = "ml-team";
    team.keyids = {team_key_.key.keyid};
    team.paths = std::vector<std::string>{"models/*"};
    team.terminating = true;
    delegations.roles.push_back(team);
    DelegatedRole fallback;
    fallback.name = "fallback";
    fallback.keyids = {team_key_.key.keyid};
    fallback.paths = std::vector<std::string>{"*", "models/*"};
    delegations.roles.push_back(fallback);
    repository_.targets.delegations = delegations;
    ++repository_.targets.version;
    repository_.PublishTargets();

    team_targets_.version = 1;
    team_targets_.expires = TestNow() + absl::Hours(24 * 30);
    TargetFile file;
    file.length = 5;
    file.hashes["sha256"] = Sha256Hex("model");
    file.custom = WeightpathTargetToJson({"spark", "bf16", "1", {"cuda_discrete"}});
    team_targets_.targets["models/spark.bin"] = file;
    team_targets_.targets["outside.bin"] = file;  // not delegated to ml-team
    repository_.PublishDelegated("ml-team", team_targets_, {&team_key_});
    Targets fallback_targets = team_targets_;
    fallback_targets.targets.clear();
    fallback_targets.targets["models/other.bin"] = file;
    fallback_targets.targets["other.bin"] = file;
    repository_.PublishDelegated("fallback", fallback_targets, {&team_key_});
    repository_.PublishSnapshotAndTimestamp();
  }

  TestRepository repository_;
  SigningKey team_key_ = NewKey("placeholder");
  Targets team_targets_;
};

TEST_F(TrustDelegationTest, FindsATargetInADelegatedRole) {
  absl::StatusOr<TrustedMetadataSet> client = repository_.NewClient();
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(RefreshMetadata(*client, repository_.Fetcher()), IsOk());
  const MetadataFetcher fetch = repository_.Fetcher();
  absl::StatusOr<TargetInfo> target = FindTarget(*client, "models/spark.bin", &fetch);
  ASSERT_THAT(target, IsOk());
  EXPECT_EQ(target->role, "ml-team");
  EXPECT_EQ(target->sha256, Sha256Hex("model"));
  EXPECT_EQ(repository_.requests.back().file_name, "1.ml-team.json");
  // Another path under a terminating delegation is never looked up further.
  EXPECT_THAT(FindTarget(*client, "models/other.bin", &fetch),
              StatusIs(absl::StatusCode::kNotFound));
  // A role's entry outside its delegated paths is not trusted; the
  // non-terminating fallback answers for other.bin.
  EXPECT_THAT(FindTarget(*client, "outside.bin", &fetch), StatusIs(absl::StatusCode::kNotFound));
  absl::StatusOr<TargetInfo> other = FindTarget(*client, "other.bin", &fetch);
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(other->role, "fallback");

  absl::StatusOr<std::vector<TargetInfo>> all = ListTargets(*client, &fetch);
  ASSERT_THAT(all, IsOk());
  std::vector<std::string> paths;
  for (const TargetInfo& info : *all) paths.push_back(absl::StrCat(info.path, "@", info.role));
  EXPECT_THAT(paths, ElementsAre("models/spark.bin@ml-team", "other.bin@fallback"));
}

TEST_F(TrustDelegationTest, WithoutAFetcherNamesTheFileToLoad) {
  absl::StatusOr<TrustedMetadataSet> client = repository_.NewClient();
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(RefreshMetadata(*client, repository_.Fetcher()), IsOk());
  EXPECT_THAT(FindTarget(*client, "models/spark.bin"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("1.ml-team.json")));
}

TEST_F(TrustDelegationTest, DelegatedRoleSignedByAnotherKeyIsRefused) {
  SigningKey stranger = NewKey("stranger");
  repository_.PublishDelegated("ml-team", team_targets_, {&stranger});
  repository_.PublishSnapshotAndTimestamp();
  absl::StatusOr<TrustedMetadataSet> client = repository_.NewClient();
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(RefreshMetadata(*client, repository_.Fetcher()), IsOk());
  const MetadataFetcher fetch = repository_.Fetcher();
  EXPECT_THAT(FindTarget(*client, "models/spark.bin", &fetch),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       HasSubstr("1.ml-team.json: 0 of the 1 signatures required from the keys "
                                 "targets v2 delegates ml-team to")));
}

TEST_F(TrustDelegationTest, PersistedDelegatedRolesAreReused) {
  absl::StatusOr<TrustedMetadataSet> client = repository_.NewClient();
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(RefreshMetadata(*client, repository_.Fetcher()), IsOk());
  const MetadataFetcher fetch = repository_.Fetcher();
  ASSERT_THAT(FindTarget(*client, "models/spark.bin", &fetch), IsOk());
  const std::string state = client->SerializeTrusted();
  repository_.requests.clear();
  absl::StatusOr<TrustedMetadataSet> restored = TrustedMetadataSet::Restore(state, TestNow());
  ASSERT_THAT(restored, IsOk());
  ASSERT_THAT(RefreshMetadata(*restored, repository_.Fetcher()), IsOk());
  ASSERT_THAT(FindTarget(*restored, "models/spark.bin", &fetch), IsOk());
  EXPECT_THAT(FileNames(repository_.requests), ElementsAre("2.root.json", "timestamp.json"));
}

// The persisted timestamp with one hex digit of its signature changed.
std::string WithBrokenTimestampSignature(const std::string& state) {
  absl::StatusOr<Json> document = ParseJson(state, "state");
  EXPECT_THAT(document, IsOk());
  std::string timestamp = document->Find("timestamp")->string_value();
  const size_t sig = timestamp.find("\"sig\"");
  const size_t digit = timestamp.find('"', timestamp.find(':', sig)) + 1;
  timestamp[digit] = timestamp[digit] == '0' ? '1' : '0';
  document->Set("timestamp", Json::String(timestamp));
  return PrettyJson(*document);
}

TEST(TrustStateTest, AStateVerifiedWhenWrittenSkipsOnlyItsSignatures) {
  TestRepository repository;
  const std::string broken = WithBrokenTimestampSignature(RefreshedState(repository));

  // Checked again: the broken copy is dropped (and the download verified).
  absl::StatusOr<TrustedMetadataSet> checked = TrustedMetadataSet::Restore(broken, TestNow());
  ASSERT_THAT(checked, IsOk());
  ASSERT_THAT(RefreshMetadata(*checked, repository.Fetcher()), IsOk());
  EXPECT_THAT(checked->notes(), ElementsAre(HasSubstr("persisted timestamp.json dropped")));

  // Vouched for by the caller: taken as verified, so nothing is dropped,
  // and the download (other bytes than the copy) is verified as always.
  absl::StatusOr<TrustedMetadataSet> vouched = TrustedMetadataSet::Restore(
      broken, TestNow(), {}, PersistedState::kVerifiedWhenWritten);
  ASSERT_THAT(vouched, IsOk());
  ASSERT_THAT(RefreshMetadata(*vouched, repository.Fetcher()), IsOk());
  EXPECT_THAT(vouched->notes(), ::testing::IsEmpty());

  // Expiry, versions and consistency are still checked: a month on, the
  // timestamp the repository still serves has expired.
  repository.PublishSnapshotAndTimestamp();
  const std::string state = RefreshedState(repository);
  absl::StatusOr<TrustedMetadataSet> late = TrustedMetadataSet::Restore(
      state, TestNow() + absl::Hours(24 * 30), {}, PersistedState::kVerifiedWhenWritten);
  ASSERT_THAT(late, IsOk());
  EXPECT_THAT(RefreshMetadata(*late, repository.Fetcher()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("expired")));
  // A version rollback still is one.
  absl::StatusOr<TrustedMetadataSet> current = TrustedMetadataSet::Restore(
      state, TestNow(), {}, PersistedState::kVerifiedWhenWritten);
  ASSERT_THAT(current, IsOk());
  repository.timestamp.version -= 2;
  repository.PublishSnapshotAndTimestamp();
  EXPECT_THAT(RefreshMetadata(*current, repository.Fetcher()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("rollback")));
}

TEST(TrustStateTest, RestoreRefusesAnUnsignedRoot) {
  TestRepository repository;
  std::string state = RefreshedState(repository);
  EXPECT_THAT(TrustedMetadataSet::Restore("{}", TestNow()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weightpath-trust-state/1")));
  // The root's version, inside the escaped root document.
  const std::string version = "\\\"version\\\": 1";
  const size_t at = state.find(version);
  ASSERT_NE(at, std::string::npos);
  state.replace(at, version.size(), "\\\"version\\\": 7");
  EXPECT_THAT(TrustedMetadataSet::Restore(state, TestNow()),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("below threshold")));
}

}  // namespace
}  // namespace weightpath::trust
