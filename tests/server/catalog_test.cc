#include "server/config/catalog.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "server/config/demo_catalog.h"
#include "tests/testing/status_matchers.h"
#include "trust/build_manifest.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

const policy::Policy& DefaultPolicy() {
  static const std::shared_ptr<const policy::Policy> policy = policy::DefaultPolicy();
  return *policy;
}

std::string DemoText() { return std::string(DemoCatalogYaml()); }
// A catalog of single-file builds (the demo catalog as it was before its
// builds became model directories): the faults below are placed by line.
std::string SingleFileText() {
  return R"yaml(# The demo catalog compiled into weightpath-server (used when --catalog is not
# given). Its files are what scripts/make-demo-artifacts DIR writes; serve DIR
# on 127.0.0.1:8765 and the URIs below resolve. Regenerate with
#   scripts/make-demo-artifacts --catalog DIR
default_model: Spark-X2.5-1.7B
models:
  Spark-X2.5-1.7B:
    bf16:
      uri: http://127.0.0.1:8765/Spark-X2.5-1.7B/bf16.bin
      sha256: efd41686dc43781edd37a8f8b91b76b591e79be3aa0c66c24129cd4f2e14442b
      size_bytes: 262144
      version: "demo-1"
    export-qnn-w8a16:
      uri: http://127.0.0.1:8765/Spark-X2.5-1.7B/export-qnn-w8a16.bin
      sha256: 1ca89ed1963c547e4d69aa6868d9b8fead58df8e503623a84956d4e6a740071c
      size_bytes: 262144
      version: "demo-1"
    fp16:
      uri: http://127.0.0.1:8765/Spark-X2.5-1.7B/fp16.bin
      sha256: 90a7e5bf64cfad05d34a4f5fdee6f858db013646f2d92d0534a38b974ad43527
      size_bytes: 262144
      version: "demo-1"
    w4a16-tinygemm:
      uri: http://127.0.0.1:8765/Spark-X2.5-1.7B/w4a16-tinygemm.bin
      sha256: 977f2d077f256d2153a0371275e91edd01102194f73c335c48c632758896fce2
      size_bytes: 262144
      version: "demo-1"
    w4a8-amx:
      uri: http://127.0.0.1:8765/Spark-X2.5-1.7B/w4a8-amx.bin
      sha256: ec5b345fc6cb122a070d129e1cca99e0b940821652abc81facaff87c0b5bc263
      size_bytes: 262144
      version: "demo-1"
)yaml";
}

absl::StatusOr<std::shared_ptr<const Catalog>> Load(const std::string& text) {
  return LoadCatalog(text, "catalog.yaml", DefaultPolicy());
}

TEST(ServerCatalogTest, EmbeddedDemoCatalogCoversEveryReachablePath) {
  absl::StatusOr<std::shared_ptr<const Catalog>> catalog = Load(DemoText());
  ASSERT_THAT(catalog, IsOk());
  EXPECT_EQ((*catalog)->default_model(), "Spark-X2.5-1.7B");
  EXPECT_EQ((*catalog)->known_models(), "Spark-X2.5-1.7B");
  EXPECT_THAT((*catalog)->version(), ::testing::StartsWith("sha256:"));
  const Catalog::ModelArtifacts* artifacts = (*catalog)->FindModel("Spark-X2.5-1.7B");
  ASSERT_NE(artifacts, nullptr);
  for (const std::string& name : DefaultPolicy().ReachablePathNames()) {
    SCOPED_TRACE(name);
    ASSERT_EQ(artifacts->count(name), 1u);
    const CatalogArtifact& artifact = artifacts->at(name);
    if (name == "export-qnn-w8a16") {  // an NPU export is one file
      EXPECT_EQ(artifact.uri, absl::StrCat("http://127.0.0.1:8765/Spark-X2.5-1.7B/", name, ".bin"));
      EXPECT_EQ(artifact.size_bytes, 262144u);
      continue;
    }
    // A model directory the engine loads: config, tokenizer, two shards, index.
    EXPECT_EQ(artifact.uri, "");
    ASSERT_EQ(artifact.files.size(), 6u);
    for (const CatalogBuildFile& file : artifact.files) {
      EXPECT_EQ(file.uri,
                absl::StrCat("http://127.0.0.1:8765/Spark-X2.5-1.7B/", name, "/", file.path));
    }
    EXPECT_EQ(artifact.files[0].path, "config.json");
    EXPECT_EQ(artifact.files[1].path, "model-00001-of-00002.safetensors");
  }
  EXPECT_EQ((*catalog)->FindModel("Other-7B"), nullptr);
}

TEST(ServerCatalogTest, SecondModelAndFileUrisLoad) {
  std::string text = SingleFileText();
  std::string second = text.substr(text.find("  Spark-X2.5-1.7B:"));
  second = absl::StrReplaceAll(second, {{"Spark-X2.5-1.7B", "Tiny-0.5B"},
                                        {"http://127.0.0.1:8765", "file:///srv/weights"}});
  absl::StatusOr<std::shared_ptr<const Catalog>> catalog = Load(text + second);
  ASSERT_THAT(catalog, IsOk());
  EXPECT_EQ((*catalog)->known_models(), "Spark-X2.5-1.7B, Tiny-0.5B");
  EXPECT_EQ((*catalog)->FindModel("Tiny-0.5B")->at("bf16").uri,
            "file:///srv/weights/Tiny-0.5B/bf16.bin");
}

struct BrokenCatalog {
  std::string name;
  std::string from;
  std::string to;
  std::string message_has;
};

TEST(ServerCatalogTest, EachFaultIsRefusedNamingFileLineAndField) {
  const std::string sha = "efd41686dc43781edd37a8f8b91b76b591e79be3aa0c66c24129cd4f2e14442b";
  const std::vector<BrokenCatalog> cases = {
      {"uppercase sha256", sha, "EFD41686dc43781edd37a8f8b91b76b591e79be3aa0c66c24129cd4f2e14442b",
       "catalog.yaml:10:15: models.Spark-X2.5-1.7B.bf16.sha256: must be 64 lowercase hex digits"},
      {"short sha256", sha, "efd416", "models.Spark-X2.5-1.7B.bf16.sha256"},
      {"ftp uri", "uri: http://127.0.0.1:8765/Spark-X2.5-1.7B/bf16.bin",
       "uri: ftp://host/bf16.bin", "catalog.yaml:9:12: models.Spark-X2.5-1.7B.bf16.uri"},
      {"zero size", "size_bytes: 262144\n      version: \"demo-1\"\n    export",
       "size_bytes: 0\n      version: \"demo-1\"\n    export",
       "models.Spark-X2.5-1.7B.bf16.size_bytes: \"0\" must be a positive"},
      {"negative size", "size_bytes: 262144\n      version: \"demo-1\"\n    export",
       "size_bytes: -5\n      version: \"demo-1\"\n    export",
       "models.Spark-X2.5-1.7B.bf16.size_bytes"},
      {"unknown artifact key", "version: \"demo-1\"\n    export",
       "version: \"demo-1\"\n      mirror: x\n    export",
       "models.Spark-X2.5-1.7B.bf16.mirror: unknown key"},
      {"missing path", "    w4a8-amx:", "    w4a8-amx-renamed:",
       "models.Spark-X2.5-1.7B.w4a8-amx: is missing"},
      {"default model not in models", "default_model: Spark-X2.5-1.7B",
       "default_model: Other-7B", "catalog.yaml:5:16: default_model: \"Other-7B\" is not one"},
      {"unknown top-level key", "models:", "extras: 1\nmodels:", "extras: unknown key"},
      {"invalid YAML", "models:", "models: [", "catalog.yaml"},
  };
  for (const BrokenCatalog& test_case : cases) {
    SCOPED_TRACE(test_case.name);
    const std::string text = SingleFileText();
    const size_t at = text.find(test_case.from);
    ASSERT_NE(at, std::string::npos);
    std::string broken = text;
    broken.replace(at, test_case.from.size(), test_case.to);
    EXPECT_THAT(Load(broken),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(test_case.message_has)));
  }
}

TEST(ServerCatalogTest, TargetPathIsOptionalAndAPlainCatalogIsNeverSigned) {
  std::string text = SingleFileText();
  const std::string bf16_version = "version: \"demo-1\"\n    export";
  text.replace(text.find(bf16_version), bf16_version.size(),
               "version: \"demo-1\"\n      target_path: models/spark/bf16.bin\n    export");
  absl::StatusOr<std::shared_ptr<const Catalog>> catalog = Load(text);
  ASSERT_THAT(catalog, IsOk());
  const Catalog::ModelArtifacts& artifacts = *(*catalog)->FindModel("Spark-X2.5-1.7B");
  EXPECT_EQ(artifacts.at("bf16").target_path, "models/spark/bf16.bin");
  EXPECT_FALSE(artifacts.at("bf16").signed_target);
  EXPECT_EQ(artifacts.at("fp16").target_path, "");

  v1::Artifact artifact;
  FillArtifact(artifacts.at("bf16"), &artifact);
  EXPECT_EQ(artifact.uri(), "http://127.0.0.1:8765/Spark-X2.5-1.7B/bf16.bin");
  EXPECT_EQ(artifact.sha256(), artifacts.at("bf16").sha256);
  EXPECT_EQ(artifact.size_bytes(), 262144u);
  EXPECT_EQ(artifact.version(), "demo-1");
  EXPECT_EQ(artifact.target_path(), "models/spark/bf16.bin");
  EXPECT_FALSE(artifact.signed_target());
}

TEST(ServerCatalogTest, ATargetPathOutsideTheMirrorIsRefused) {
  const std::string bf16_version = "version: \"demo-1\"\n    export";
  for (const auto& [path, reason] : std::vector<std::pair<std::string, std::string>>{
           {"/etc/passwd", "must be relative"},
           {"models/../../etc/passwd", "'.' or '..' component"},
           {"models//bf16.bin", "empty path component"},
           {"\"models\\\\bf16.bin\"", "backslash"},
           {"\"models/\\tbf16.bin\"", "control character"},
           {"\"\"", "empty target path"},
           {std::string(1025, 'a'), "longer than 1024 bytes"}}) {
    SCOPED_TRACE(path);
    std::string text = SingleFileText();
    text.replace(text.find(bf16_version), bf16_version.size(),
                 absl::StrCat("version: \"demo-1\"\n      target_path: ", path, "\n    export"));
    EXPECT_THAT(Load(text),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr("models.Spark-X2.5-1.7B.bf16.target_path"),
                                          HasSubstr(reason))));
  }
}

// The bf16 entry of the demo catalog replaced by `entry` (indented for its
// place, six spaces), the rest as it is.
std::string WithBf16(const std::string& entry) {
  std::string text = SingleFileText();
  const size_t at = text.find("    bf16:\n");
  const size_t end = text.find("    export-qnn-w8a16:");
  text.replace(at, end - at, absl::StrCat("    bf16:\n", entry));
  return text;
}

constexpr char kShaA[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
constexpr char kShaB[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

std::string DirectoryBuild(const std::string& extra = "") {
  return absl::StrCat("      version: \"dir-1\"\n"
                      "      base_uri: https://mirror.example/spark/bf16/\n",
                      extra,
                      "      files:\n"
                      "        - {path: model-00001-of-00002.safetensors, sha256: ", kShaB,
                      ", size_bytes: 4096}\n"
                      "        - {path: config.json, sha256: ", kShaA, ", size_bytes: 0}\n"
                      "        - {path: \"tokenizer dir/t+k.json\", sha256: ", kShaA,
                      ", size_bytes: 12, uri: \"file:///srv/tok.json\"}\n");
}

TEST(ServerCatalogTest, ADirectoryBuildListsItsFilesAndIsItsManifest) {
  absl::StatusOr<std::shared_ptr<const Catalog>> catalog = Load(WithBf16(DirectoryBuild()));
  ASSERT_THAT(catalog, IsOk());
  const CatalogArtifact& artifact = (*catalog)->FindModel("Spark-X2.5-1.7B")->at("bf16");
  ASSERT_TRUE(artifact.directory_build());
  EXPECT_EQ(artifact.uri, "");
  ASSERT_EQ(artifact.files.size(), 3u);
  // Sorted by path; base_uri joined with the percent-encoded path, a file's
  // own uri kept.
  EXPECT_EQ(artifact.files[0].path, "config.json");
  EXPECT_EQ(artifact.files[0].uri, "https://mirror.example/spark/bf16/config.json");
  EXPECT_EQ(artifact.files[1].path, "model-00001-of-00002.safetensors");
  EXPECT_EQ(artifact.files[2].uri, "file:///srv/tok.json");
  const trust::BuildManifestDigest manifest = trust::DigestBuildManifest(
      {{"config.json", kShaA, 0},
       {"model-00001-of-00002.safetensors", kShaB, 4096},
       {"tokenizer dir/t+k.json", kShaA, 12}});
  EXPECT_EQ(artifact.sha256, manifest.sha256);
  EXPECT_EQ(artifact.size_bytes, manifest.size_bytes);

  v1::Artifact out;
  FillArtifact(artifact, &out);
  EXPECT_EQ(out.uri(), "");
  EXPECT_EQ(out.sha256(), manifest.sha256);
  EXPECT_EQ(out.size_bytes(), manifest.size_bytes);
  EXPECT_EQ(out.version(), "dir-1");
  ASSERT_EQ(out.files_size(), 3);
  EXPECT_EQ(out.files(1).sha256(), kShaB);
  EXPECT_EQ(out.files(1).size_bytes(), 4096u);
  EXPECT_EQ(out.files(1).uri(),
            "https://mirror.example/spark/bf16/model-00001-of-00002.safetensors");
  EXPECT_EQ(out.files(0).uri(), "https://mirror.example/spark/bf16/config.json");
  EXPECT_EQ(JoinUrl("https://m.example/a/", "tokenizer dir/t+k.json"),
            "https://m.example/a/tokenizer%20dir/t%2bk.json");
  // The same build answered from the catalog and from a device's own list
  // has one digest.
  EXPECT_EQ(trust::DigestBuildManifest(trust::ToBuildManifestFiles(out.files())).sha256,
            out.sha256());
}

TEST(ServerCatalogTest, ASingleFileBuildMayNameItsTokenizer) {
  absl::StatusOr<std::shared_ptr<const Catalog>> catalog =
      Load(WithBf16(absl::StrCat("      uri: https://m.example/spark.gguf\n      sha256: ", kShaA,
                                 "\n      size_bytes: 10\n      tokenizer: Spark/Spark-X2.5-1.7B\n")));
  ASSERT_THAT(catalog, IsOk());
  v1::Artifact out;
  FillArtifact((*catalog)->FindModel("Spark-X2.5-1.7B")->at("bf16"), &out);
  EXPECT_EQ(out.tokenizer(), "Spark/Spark-X2.5-1.7B");
  EXPECT_EQ(out.files_size(), 0);
  EXPECT_EQ(out.uri(), "https://m.example/spark.gguf");
}

TEST(ServerCatalogTest, EachDirectoryBuildFaultIsRefusedNamingLineAndField) {
  const std::string file = absl::StrCat("sha256: ", kShaA, ", size_bytes: 1");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {WithBf16(DirectoryBuild(absl::StrCat("      sha256: ", kShaA, "\n"))),
       "catalog.yaml:11:7: models.Spark-X2.5-1.7B.bf16.sha256: a directory build (`files`) takes "
       "no `sha256`"},
      {WithBf16(DirectoryBuild("      uri: https://m.example/x\n")),
       "models.Spark-X2.5-1.7B.bf16.uri: a directory build"},
      {WithBf16(DirectoryBuild("      tokenizer: Spark/x\n")),
       "models.Spark-X2.5-1.7B.bf16.tokenizer: a directory build"},
      {WithBf16(absl::StrCat("      base_uri: https://m.example/\n      uri: https://m.example/x\n"
                             "      sha256: ", kShaA, "\n      size_bytes: 1\n")),
       "models.Spark-X2.5-1.7B.bf16.base_uri: only a directory build"},
      {WithBf16(absl::StrCat("      files:\n        - {path: config.json, ", file, "}\n")),
       "catalog.yaml:10:11: models.Spark-X2.5-1.7B.bf16.files[0]: has no uri, and the build gives "
       "no base_uri"},
      {WithBf16("      base_uri: ftp://m.example/\n      files: []\n"),
       "models.Spark-X2.5-1.7B.bf16.base_uri: \"ftp://m.example/\" must start with"},
      {WithBf16("      base_uri: https://m.example/\n      files: []\n"),
       "models.Spark-X2.5-1.7B.bf16.files: must list at least one file"},
      {WithBf16(absl::StrCat("      base_uri: https://m.example/\n      files:\n"
                             "        - {path: ../../etc/passwd, ", file, "}\n")),
       "models.Spark-X2.5-1.7B.bf16.files[0].path: \"../../etc/passwd\": "},
      {WithBf16(absl::StrCat("      base_uri: https://m.example/\n      files:\n"
                             "        - {path: \"a\\nb\", ", file, "}\n")),
       "models.Spark-X2.5-1.7B.bf16.files[0].path: \"a\\x0ab\""},
      {WithBf16(absl::StrCat("      base_uri: https://m.example/\n      files:\n"
                             "        - {path: /etc/passwd, ", file, "}\n")),
       "files[0].path"},
      {WithBf16(absl::StrCat("      base_uri: https://m.example/\n      files:\n"
                             "        - {path: Config.json, ", file, "}\n"
                             "        - {path: config.json, ", file, "}\n")),
       "models.Spark-X2.5-1.7B.bf16.files: files \"Config.json\" and \"config.json\": differ "
       "only in case"},
      {WithBf16(absl::StrCat("      base_uri: https://m.example/\n      files:\n"
                             "        - {path: a, ", file, "}\n"
                             "        - {path: a/b, ", file, "}\n")),
       "lies under \"a\""},
      {WithBf16("      base_uri: https://m.example/\n      files:\n"
                "        - {path: a, sha256: ABC, size_bytes: 1}\n"),
       "models.Spark-X2.5-1.7B.bf16.files[0].sha256: must be 64 lowercase hex digits"},
      {WithBf16(absl::StrCat("      base_uri: https://m.example/\n      files:\n"
                             "        - {path: a, sha256: ", kShaA, ", size_bytes: -1}\n")),
       "models.Spark-X2.5-1.7B.bf16.files[0].size_bytes"},
      {WithBf16(absl::StrCat("      base_uri: https://m.example/\n      files:\n"
                             "        - {path: a, sha256: ", kShaA, "}\n")),
       "models.Spark-X2.5-1.7B.bf16.files[0].size_bytes: is missing"},
      {WithBf16(absl::StrCat("      base_uri: https://m.example/\n      files:\n"
                             "        - {path: a, mirror: x, ", file, "}\n")),
       "models.Spark-X2.5-1.7B.bf16.files[0].mirror: unknown key"},
      {WithBf16("      base_uri: https://m.example/\n      files: {path: a}\n"),
       "models.Spark-X2.5-1.7B.bf16.files: must list at least one file"},
  };
  for (const auto& [text, message] : cases) {
    SCOPED_TRACE(message);
    EXPECT_THAT(Load(text), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
  }
}

TEST(ServerCatalogTest, ADirectoryBuildOfMoreThanTheMostFilesIsRefusedBeforeReadingThem) {
  std::string files;
  for (size_t i = 0; i <= trust::kMaxBuildFiles; ++i) {
    absl::StrAppend(&files, "        - {path: f", i, ", sha256: ", kShaA, ", size_bytes: 1}\n");
  }
  EXPECT_THAT(Load(WithBf16(absl::StrCat("      base_uri: https://m.example/\n      files:\n", files))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("models.Spark-X2.5-1.7B.bf16.files: lists 4097 files; at most "
                                 "4096")));
}

TEST(ServerCatalogTest, CheckTargetPathAcceptsWhatReposAddTargetAccepts) {
  EXPECT_THAT(CheckTargetPath("models/spark-x2.5-1.7b/w4a8-amx.bin"), IsOk());
  EXPECT_THAT(CheckTargetPath("a.bin"), IsOk());
  EXPECT_THAT(CheckTargetPath("a/./b"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckTargetPath("a/"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ServerCatalogTest, MissingSectionsAreNamed) {
  EXPECT_THAT(Load("default_model: X\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("models: is missing")));
  EXPECT_THAT(Load("- a\n- b\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be a mapping")));
  std::string no_default = DemoText();
  no_default.erase(no_default.find("default_model:"),
                   no_default.find("models:") - no_default.find("default_model:"));
  EXPECT_THAT(Load(no_default), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("default_model: is missing")));
}

// A catalog of one-file builds for every path the default policy can
// return, then `extra` (top-level keys).
std::string ReachableCatalog(const std::string& extra) {
  std::string text = "default_model: M\nmodels:\n  M:\n";
  for (const std::string& name : DefaultPolicy().ReachablePathNames()) {
    absl::StrAppend(&text, "    ", name, ": {uri: https://m.example/", name, ", sha256: ",
                    std::string(64, 'a'), ", size_bytes: 1}\n");
  }
  return text + extra;
}

TEST(ServerCatalogTest, ModelFactsAreOptionalAndReadPerModel) {
  absl::StatusOr<std::shared_ptr<const Catalog>> catalog = Load(ReachableCatalog(
      "model_facts:\n"
      "  M: {parameters: 8030261248, attention_heads: 32, kv_heads: 8, layers: 32,\n"
      "      head_dim: 128, max_context: 131072}\n"));
  ASSERT_THAT(catalog, IsOk());
  const policy::ModelFacts& facts = (*catalog)->FindModelFacts("M");
  EXPECT_EQ(facts.parameters, 8030261248u);
  EXPECT_EQ(facts.attention_heads, 32u);
  EXPECT_EQ(facts.kv_heads, 8u);
  EXPECT_EQ(facts.layers, 32u);
  EXPECT_EQ(facts.head_dim, 128u);
  EXPECT_EQ(facts.max_context, 131072u);
  EXPECT_FALSE((*catalog)->FindModelFacts("other").parameters.has_value());

  absl::StatusOr<std::shared_ptr<const Catalog>> partial =
      Load(ReachableCatalog("model_facts:\n  M: {attention_heads: 12}\n"));
  ASSERT_THAT(partial, IsOk());
  EXPECT_EQ((*partial)->FindModelFacts("M").attention_heads, 12u);
  EXPECT_FALSE((*partial)->FindModelFacts("M").layers.has_value());

  absl::StatusOr<std::shared_ptr<const Catalog>> none = Load(ReachableCatalog(""));
  ASSERT_THAT(none, IsOk());
  EXPECT_TRUE((*none)->model_facts().empty());
}

TEST(ServerCatalogTest, EachModelFactsFaultIsRefusedNamingLineAndField) {
  const std::string models = ReachableCatalog("");
  const int facts_line = static_cast<int>(std::count(models.begin(), models.end(), '\n')) + 1;
  const struct {
    std::string facts;
    std::string fault;
  } cases[] = {
      {"model_facts:\n  M: {attention_heads: 0}\n",
       absl::StrCat("catalog.yaml:", facts_line + 1, ":")},
      {"model_facts:\n  M: {attention_heads: 0}\n", "model_facts.M.attention_heads"},
      {"model_facts:\n  M:\n    attention_heads: 8\n    kv_heads: 16\n",
       absl::StrCat("catalog.yaml:", facts_line + 3, ":")},
      {"model_facts:\n  M:\n    attention_heads: 8\n    kv_heads: 16\n",
       "model_facts.M.kv_heads: exceeds attention_heads"},
      {"model_facts:\n  M: {heads: 8}\n", "heads"},
      {"model_facts:\n  M: {max_context: 99999999999}\n", "model_facts.M.max_context"},
      {"model_facts:\n  M: {parameters: -1}\n", "model_facts.M.parameters"},
      {"model_facts:\n  M: {layers: many}\n", "model_facts.M.layers"},
      {"model_facts: [1, 2]\n", "model_facts"},
      {"model_facts:\n  Typo: {layers: 2}\n",
       "model_facts.Typo: \"Typo\" is not one of the models"},
  };
  for (const auto& c : cases) {
    EXPECT_THAT(Load(models + c.facts),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.fault)))
        << c.facts;
  }
}

}  // namespace
}  // namespace weightpath::server
