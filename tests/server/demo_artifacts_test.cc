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
  for (const auto& [path_name, artifact] : *artifacts) {
    SCOPED_TRACE(path_name);
    const std::string bytes =
        testing::ReadFileOrDie(dir.File(model + "/" + path_name + ".bin"));
    EXPECT_EQ(bytes.size(), artifact.size_bytes);
    EXPECT_EQ(Sha256Hex(bytes), artifact.sha256);
  }
}

}  // namespace
}  // namespace weightpath::server
