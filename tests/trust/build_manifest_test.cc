// The directory build manifest: hostile paths refused, one canonical form,
// one digest.
#include "trust/build_manifest.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "trust/client.h"
#include "trust/crypto.h"

namespace weightpath::trust {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

std::string Hex(char c) { return std::string(64, c); }

std::vector<BuildManifestFile> ModelFiles() {
  return {{"model-00002-of-00002.safetensors", Hex('2'), 2000},
          {"config.json", Hex('c'), 700},
          {"tokenizer.json", Hex('e'), 9000},
          {"model-00001-of-00002.safetensors", Hex('1'), 3000},
          {"model.safetensors.index.json", Hex('f'), 400}};
}

TEST(TrustBuildManifestTest, PathsAHostileMirrorOrCatalogCouldSendAreRefused) {
  const struct {
    std::string path;
    const char* reason;
  } kRefused[] = {
      {"", "empty"},
      {"/etc/passwd", "relative"},
      {"../../etc/cron.d/x", "'..'"},
      {"a/../../b", "'..'"},
      {"./config.json", "'.'"},
      {"a//b", "empty component"},
      {"dir/", "ends with '/'"},
      {std::string("a\0b", 3), "NUL"},
      {"a\nb", "control"},
      {"a\x1b[2Jb", "control"},
      {"a\\..\\b", "backslash"},
      {"\xff\xfe", "UTF-8"},
      {"a\xc2\x9b" "b", "control or text-direction"},
      {"evil\xe2\x80\xae" "cod.exe", "control or text-direction"},
      {std::string(600, 'a'), "longer than 512"},
      {std::string(256, 'a') + "/b", "component longer than 255"},
      {"a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q", "16 components"},
  };
  for (const auto& refused : kRefused) {
    EXPECT_THAT(CheckBuildFilePath(refused.path),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(refused.reason)))
        << refused.path;
  }
  for (const char* fine : {"config.json", "onnx/model.onnx", ".gitattributes", "a..b", "日本語.txt",
                           "tokenizer/vocab.json"}) {
    EXPECT_THAT(CheckBuildFilePath(fine), IsOk()) << fine;
  }
}

TEST(TrustBuildManifestTest, ListsThatWouldCollideOnADeviceAreRefused) {
  EXPECT_THAT(ValidateBuildFiles(ModelFiles()), IsOk());
  EXPECT_THAT(ValidateBuildFiles({}), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("lists no file")));
  auto twice = ModelFiles();
  twice.push_back({"config.json", Hex('d'), 1});
  EXPECT_THAT(ValidateBuildFiles(twice), StatusIs(absl::StatusCode::kInvalidArgument,
                                                  HasSubstr("the same path twice")));
  auto cased = ModelFiles();
  cased.push_back({"Config.JSON", Hex('d'), 1});
  EXPECT_THAT(ValidateBuildFiles(cased),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("differ only in case")));
  auto nested = ModelFiles();
  nested.push_back({"config.json/x", Hex('d'), 1});
  EXPECT_THAT(ValidateBuildFiles(nested),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lies under \"config.json\"")));
  auto bad_digest = ModelFiles();
  bad_digest[0].sha256 = std::string(64, 'A');
  EXPECT_THAT(ValidateBuildFiles(bad_digest),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("64 lowercase hex")));
  std::vector<BuildManifestFile> many(kMaxBuildFiles + 1, {"f", Hex('a'), 1});
  EXPECT_THAT(ValidateBuildFiles(many),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 4096")));
  auto escaped = ModelFiles();
  escaped.push_back({"x\x1b]0;owned\x07", Hex('d'), 1});
  const absl::Status refused = ValidateBuildFiles(escaped);
  EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("\x1b")));
}

TEST(TrustBuildManifestTest, OneCanonicalFormWhateverTheOrder) {
  auto files = ModelFiles();
  const std::string manifest = CanonicalBuildManifest(files);
  EXPECT_EQ(manifest.substr(0, 42), R"({"files":[{"path":"config.json","sha256":")");
  EXPECT_THAT(manifest, HasSubstr(R"("format":"weightpath-build-manifest/1"})"));
  std::reverse(files.begin(), files.end());
  EXPECT_EQ(CanonicalBuildManifest(files), manifest);
  const BuildManifestDigest digest = DigestBuildManifest(files);
  EXPECT_EQ(digest.sha256, Sha256Hex(manifest));
  EXPECT_EQ(digest.size_bytes, manifest.size());

  absl::StatusOr<std::vector<BuildManifestFile>> parsed = ParseBuildManifest(manifest, "m.json");
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_EQ(CanonicalBuildManifest(*parsed), manifest);
}

TEST(TrustBuildManifestTest, ParsingRefusesWhatIsNotOneCanonicalManifest) {
  const std::string manifest = CanonicalBuildManifest(ModelFiles());
  EXPECT_THAT(ParseBuildManifest(std::string(manifest) + "\n", "m.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not in canonical form")));
  EXPECT_THAT(ParseBuildManifest(R"({"files":[],"format":"other/1"})", "m.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("format must be")));
  EXPECT_THAT(
      ParseBuildManifest(
          R"({"files":[{"path":"../x","sha256":")" + Hex('a') +
              R"(","size_bytes":1}],"format":"weightpath-build-manifest/1"})",
          "m.json"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'..'")));
  EXPECT_THAT(ParseBuildManifest(R"({"files":[],"format":"weightpath-build-manifest/1","x":1})",
                                 "m.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown member")));
  EXPECT_THAT(ParseBuildManifest(std::string(kMaxBuildManifestBytes + 1, ' '), "m.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most")));
}

}  // namespace
}  // namespace weightpath::trust

namespace weightpath::trust {
namespace {

TargetInfo Target(Json custom) {
  TargetInfo target;
  target.path = "models/spark/w4a16/1";
  target.role = "targets";
  target.file.length = 10;
  target.file.custom = std::move(custom);
  return target;
}

TEST(TrustWeightpathTargetTest, FilesAreOptionalAndRoundTrip) {
  WeightpathTarget single{"spark", "w4a16", "1", {"x86_cpu"}};
  absl::StatusOr<WeightpathTarget> parsed = ParseWeightpathTarget(Target(WeightpathTargetToJson(single)));
  ASSERT_THAT(parsed, IsOk());
  EXPECT_TRUE(parsed->files.empty());
  EXPECT_EQ(WeightpathTargetToJson(single).Find("files"), nullptr);

  WeightpathTarget build = single;
  build.files = {{"model.safetensors", std::string(64, 'b'), 4096},
                 {"config.json", std::string(64, 'a'), 0}};
  parsed = ParseWeightpathTarget(Target(WeightpathTargetToJson(build)));
  ASSERT_THAT(parsed, IsOk());
  ASSERT_EQ(parsed->files.size(), 2u);
  EXPECT_EQ(parsed->files[0].path, "config.json");  // as the manifest lists them: sorted
  EXPECT_EQ(DigestBuildManifest(parsed->files).sha256, DigestBuildManifest(build.files).sha256);
}

TEST(TrustWeightpathTargetTest, AHostileFileListIsRefusedNamingTheTarget) {
  const auto with_files = [](Json files) {
    Json custom = WeightpathTargetToJson({"spark", "w4a16", "1", {"x86_cpu"}});
    custom.Set("files", std::move(files));
    return Target(std::move(custom));
  };
  const auto file = [](const std::string& path) {
    Json entry = Json::MakeObject();
    entry.Set("path", Json::String(path));
    entry.Set("sha256", Json::String(std::string(64, 'a')));
    entry.Set("size_bytes", Json::Int(1));
    return entry;
  };
  EXPECT_THAT(ParseWeightpathTarget(with_files(Json::String("x"))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("target \"models/spark/w4a16/1\" (targets.json): custom: files "
                                 "must be an array")));
  EXPECT_THAT(ParseWeightpathTarget(with_files(Json::MakeArray({file("../etc/passwd")}))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"../etc/passwd\"")));
  EXPECT_THAT(ParseWeightpathTarget(with_files(Json::MakeArray({file("a"), file("A")}))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("differ only in case")));
  Json::Array many(kMaxBuildFiles + 1, Json::Int(0));  // refused before any entry is read
  EXPECT_THAT(ParseWeightpathTarget(with_files(Json::MakeArray(std::move(many)))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lists 4097 files")));
}

}  // namespace
}  // namespace weightpath::trust
