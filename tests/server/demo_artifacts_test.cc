// scripts/make-demo-artifacts must write exactly the files the embedded demo
// catalog promises, byte for byte.
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "policy/policy.h"
#include "server/config/catalog.h"
#include "server/config/content_hash.h"
#include "server/config/demo_catalog.h"
#include "tests/server/server_process.h"

namespace weightpath::server {
namespace {

TEST(ServerDemoArtifactsTest, ScriptFilesHashToWhatTheEmbeddedCatalogSays) {
  testing::TempDir dir;
  const std::string command = std::string(WEIGHTPATH_SOURCE_DIR) +
                              "/scripts/make-demo-artifacts " + dir.path() + " >/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0);

  const auto policy = policy::DefaultPolicy();
  auto catalog = LoadCatalog(DemoCatalogYaml(), kDemoCatalogSourceName, *policy);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  const std::string model = (*catalog)->default_model();
  const Catalog::ModelArtifacts* artifacts = (*catalog)->FindModel(model);
  ASSERT_NE(artifacts, nullptr);
  int directory_builds = 0;
  for (const auto& [path_name, artifact] : *artifacts) {
    SCOPED_TRACE(path_name);
    if (artifact.files.empty()) {
      const std::string bytes =
          testing::ReadFileOrDie(dir.File(model + "/" + path_name + ".bin"));
      EXPECT_EQ(bytes.size(), artifact.size_bytes);
      EXPECT_EQ(Sha256Hex(bytes), artifact.sha256);
      continue;
    }
    // A directory build: DIR/<model>/<path>/ holds each listed file.
    ++directory_builds;
    for (const CatalogBuildFile& file : artifact.files) {
      SCOPED_TRACE(file.path);
      const std::string bytes =
          testing::ReadFileOrDie(dir.File(model + "/" + path_name + "/" + file.path));
      EXPECT_EQ(bytes.size(), file.size_bytes);
      EXPECT_EQ(Sha256Hex(bytes), file.sha256);
      EXPECT_EQ(file.uri, "http://127.0.0.1:8765/" + model + "/" + path_name + "/" + file.path);
    }
  }
  // The builds vLLM loads as a model directory; the NPU export is one file.
  EXPECT_EQ(directory_builds, 4);
}

}  // namespace
}  // namespace weightpath::server
