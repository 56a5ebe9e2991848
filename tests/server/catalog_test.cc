#include "server/config/catalog.h"

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
    ASSERT_EQ(artifacts->count(name), 1u) << name;
    EXPECT_EQ(artifacts->at(name).uri,
              absl::StrCat("http://127.0.0.1:8765/Spark-X2.5-1.7B/", name, ".bin"));
    EXPECT_EQ(artifacts->at(name).size_bytes, 262144u);
  }
  EXPECT_EQ((*catalog)->FindModel("Other-7B"), nullptr);
}

TEST(ServerCatalogTest, SecondModelAndFileUrisLoad) {
  std::string text = DemoText();
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
    const std::string text = DemoText();
    const size_t at = text.find(test_case.from);
    ASSERT_NE(at, std::string::npos);
    std::string broken = text;
    broken.replace(at, test_case.from.size(), test_case.to);
    EXPECT_THAT(Load(broken),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(test_case.message_has)));
  }
}

TEST(ServerCatalogTest, TargetPathIsOptionalAndAPlainCatalogIsNeverSigned) {
  std::string text = DemoText();
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
    std::string text = DemoText();
    text.replace(text.find(bf16_version), bf16_version.size(),
                 absl::StrCat("version: \"demo-1\"\n      target_path: ", path, "\n    export"));
    EXPECT_THAT(Load(text),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr("models.Spark-X2.5-1.7B.bf16.target_path"),
                                          HasSubstr(reason))));
  }
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

}  // namespace
}  // namespace weightpath::server
