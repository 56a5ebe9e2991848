// The catalog the server answers from, against the real weightpath-server
// binary: the TUF target path a plain YAML catalog may name, sent in
// Artifact.target_path with signed_target false.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/demo_catalog.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;

TEST(ServerSignedCatalogTest, APlainCatalogSendsItsTargetPathUnsigned) {
  TempDir dir;
  std::string text(DemoCatalogYaml());
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
