// Parsing TUF metadata: the form each role must have, with errors that name
// the file and the field; expiry dates; delegation path patterns.
#include "trust/metadata.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/trust/test_repository.h"

namespace weightpath::trust {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;
using testing::TestRepository;

TEST(TrustMetadataTest, ParsesWhatItWritesAndKeepsUnknownFields) {
  TestRepository repository;
  repository.targets.unrecognized.emplace("x-owner", Json::String("ml-platform"));
  repository.AddTarget("models/a.bin", "abc");
  absl::StatusOr<Metadata<Targets>> targets =
      ParseTargets(repository.files.at("2.targets.json"), "2.targets.json");
  ASSERT_THAT(targets, IsOk());
  EXPECT_EQ(targets->signed_part.version, 2);
  ASSERT_EQ(targets->signed_part.targets.count("models/a.bin"), 1u);
  const TargetFile& file = targets->signed_part.targets.at("models/a.bin");
  EXPECT_EQ(file.length, 3);
  EXPECT_EQ(file.hashes.at("sha256"), Sha256Hex("abc"));
  EXPECT_EQ(targets->signed_part.unrecognized.at("x-owner"), Json::String("ml-platform"));
  // Re-encoding the typed value gives back exactly the signed bytes.
  EXPECT_EQ(CanonicalJson(SignedToJson(targets->signed_part)), targets->canonical_signed);
}

TEST(TrustMetadataTest, RefusesTheWrongRoleType) {
  TestRepository repository;
  EXPECT_THAT(ParseTimestamp(repository.files.at("1.snapshot.json"), "timestamp.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("timestamp.json: signed._type: \"snapshot\", expected \"timestamp\"")));
}

TEST(TrustMetadataTest, RefusesMissingAndMistypedFields) {
  TestRepository repository;
  const std::string timestamp = repository.files.at("timestamp.json");
  struct Case {
    std::string from, to, reason;
  };
  const Case cases[] = {
      {",\n    \"version\": 1\n", "\n", "signed.version: missing"},
      {"\"version\": 1\n", "\"version\": \"1\"\n", "signed.version: must be an integer, not a string"},
      {"\"version\": 1\n", "\"version\": 0\n", "signed.version: must be at least 1, not 0"},
      {"\"length\": 610", "\"length\": -1", "signed.meta[\"snapshot.json\"].length: must be at least 0"},
      {"\"spec_version\": \"1.0.31\"", "\"spec_version\": \"2.0.0\"", "is not supported"},
      {"\"spec_version\": \"1.0.31\"", "\"spec_version\": \"one\"", "is not MAJOR.MINOR"},
      {"\"snapshot.json\"", "\"other.json\"", "must describe snapshot.json and nothing else"},
  };
  for (const Case& c : cases) {
    ASSERT_NE(timestamp.find(c.from), std::string::npos) << c.from << " in\n" << timestamp;
    const std::string changed = absl::StrReplaceAll(timestamp, {{c.from, c.to}});
    EXPECT_THAT(ParseTimestamp(changed, "timestamp.json"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.reason)))
        << c.to;
  }
}

TEST(TrustMetadataTest, RefusesAKeyIdThatIsNotTheKeysHash) {
  TestRepository repository;
  const std::string& keyid = repository.keys["targets"][0].key.keyid;
  std::string root = repository.files.at("1.root.json");
  const std::string forged = std::string(64, 'a');
  root = absl::StrReplaceAll(root, {{keyid, forged}});
  EXPECT_THAT(ParseRoot(root, "1.root.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key id aaaaaaaa is not the SHA-256 of the key")));
}

TEST(TrustMetadataTest, RefusesTwoSignaturesUnderOneKeyId) {
  TestRepository repository;
  absl::StatusOr<Metadata<Timestamp>> timestamp =
      ParseTimestamp(repository.files.at("timestamp.json"), "timestamp.json");
  ASSERT_THAT(timestamp, IsOk());
  std::vector<Signature> twice = timestamp->signatures;
  twice.push_back(twice.front());
  const std::string bytes = EncodeMetadataFile(SignedToJson(timestamp->signed_part), twice);
  EXPECT_THAT(ParseTimestamp(bytes, "timestamp.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a second signature")));
}

TEST(TrustMetadataTest, ExpiresIsStrictlyTheSpecForm) {
  absl::StatusOr<absl::Time> parsed = ParseExpires("2030-01-02T03:04:05Z");
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(absl::ToUnixSeconds(*parsed), 1893553445);
  EXPECT_EQ(FormatExpires(*parsed), "2030-01-02T03:04:05Z");
  for (const char* bad : {"2030-01-02T03:04:05.000Z", "2030-01-02T03:04:05+00:00",
                          "2030-01-02 03:04:05Z", "2030-02-30T00:00:00Z", "2030-13-01T00:00:00Z",
                          "2030-01-01T24:00:00Z", "30-01-01T00:00:00Z", ""}) {
    EXPECT_THAT(ParseExpires(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
  EXPECT_THAT(ParseExpires("2028-02-29T00:00:00Z"), IsOk());
  // Every year the form allows prints back as it was written (found by
  // tuf_metadata_fuzzer: a 0326 expiry formatted as "326-...", so the parsed
  // document no longer matched the signed bytes).
  for (const char* text : {"0326-06-22T15:06:40Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"}) {
    absl::StatusOr<absl::Time> early = ParseExpires(text);
    ASSERT_THAT(early, IsOk()) << text;
    EXPECT_EQ(FormatExpires(*early), text);
  }
}

TEST(TrustMetadataTest, DelegationPathsMatchComponentByComponent) {
  DelegatedRole role;
  role.paths = std::vector<std::string>{"models/*/w4*.bin", "exact.txt", "set/[a-c]?.bin",
                                        "neg/[!x]"};
  EXPECT_TRUE(role.IsDelegatedPath("models/spark/w4a8.bin"));
  EXPECT_FALSE(role.IsDelegatedPath("models/spark/extra/w4a8.bin"));  // '*' stays in its component
  EXPECT_FALSE(role.IsDelegatedPath("models/spark/bf16.bin"));
  EXPECT_TRUE(role.IsDelegatedPath("exact.txt"));
  EXPECT_FALSE(role.IsDelegatedPath("exact.txt.sig"));
  EXPECT_TRUE(role.IsDelegatedPath("set/b1.bin"));
  EXPECT_FALSE(role.IsDelegatedPath("set/d1.bin"));
  EXPECT_TRUE(role.IsDelegatedPath("neg/y"));
  EXPECT_FALSE(role.IsDelegatedPath("neg/x"));

  DelegatedRole hashed;
  const std::string digest = Sha256Hex("models/a.bin");
  hashed.path_hash_prefixes = std::vector<std::string>{digest.substr(0, 2)};
  EXPECT_TRUE(hashed.IsDelegatedPath("models/a.bin"));
  hashed.path_hash_prefixes = std::vector<std::string>{digest[0] == '0' ? "1" : "0"};
  EXPECT_FALSE(hashed.IsDelegatedPath("models/a.bin"));
}

TEST(TrustMetadataTest, RefusesDelegationsThatAreAmbiguous) {
  TestRepository repository;
  Delegations delegations;
  DelegatedRole role;
  role.name = "targets";  // a top-level name
  role.paths = std::vector<std::string>{"*"};
  delegations.roles.push_back(role);
  repository.targets.delegations = delegations;
  ++repository.targets.version;
  repository.PublishTargets();
  EXPECT_THAT(ParseTargets(repository.files.at("2.targets.json"), "2.targets.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is a top-level role name")));
}

TEST(TrustMetadataTest, TallyCountsOnePublicKeyOnce) {
  TestRepository repository;
  absl::StatusOr<Metadata<Root>> root = ParseRoot(repository.files.at("1.root.json"), "root.json");
  ASSERT_THAT(root, IsOk());
  const std::string& keyid = repository.keys["root"][0].key.keyid;
  SignatureTally tally = TallySignatures(root->canonical_signed, root->signatures,
                                         root->signed_part.keys, {keyid}, 1);
  EXPECT_EQ(tally.valid, 1);
  EXPECT_THAT(tally.valid_keyids, ElementsAre(keyid));
  EXPECT_THAT(CheckThreshold("root.json", "root keys", tally), IsOk());
  tally.threshold = 2;
  EXPECT_THAT(CheckThreshold("root.json", "the root keys of root v1", tally),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       HasSubstr("root.json: 1 of the 2 signatures required from the root keys of "
                                 "root v1 (below threshold)")));
}

}  // namespace
}  // namespace weightpath::trust
