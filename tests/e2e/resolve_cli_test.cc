// weightpathctl resolve --server against the real weightpath-server: the
// answer over gRPC is the one the same policy gives offline, plus the
// artifact only the server's catalog knows; errors keep their gRPC meaning.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;
using weightpath::testing::ProcessResult;
using weightpath::testing::RunProcess;

std::string ExampleProfile(const std::string& name) {
  return std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/" + name + ".json";
}

v1::ResolveWeightPathResponse ParseResponse(const std::string& json) {
  v1::ResolveWeightPathResponse response;
  auto parsed = google::protobuf::util::JsonStringToMessage(json, &response);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << json;
  return response;
}

class ResolveCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = ServerProcess::Start({"--store=none"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  ProcessResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {WEIGHTPATHCTL_PATH, "resolve"});
    return RunProcess(args);
  }

  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ResolveCliTest, ServerAnswerMatchesOfflineAndCarriesTheArtifact) {
  for (const char* profile : {"intel-sapphire-rapids", "raspberry-pi-5", "tesla-t4"}) {
    for (const char* priority : {"speed", "fidelity"}) {
      ProcessResult remote = Ctl({"--server", server_->grpc_address(), "--profile",
                                  ExampleProfile(profile), "--priority", priority, "-o", "json"});
      ASSERT_EQ(remote.exit_code, 0) << remote.err << server_->Log();
      ProcessResult offline = Ctl({"--offline", "--profile", ExampleProfile(profile), "--priority",
                                   priority, "-o", "json"});
      ASSERT_EQ(offline.exit_code, 0) << offline.err;
      v1::ResolveWeightPathResponse from_server = ParseResponse(remote.out);
      v1::ResolveWeightPathResponse local = ParseResponse(offline.out);
      SCOPED_TRACE(std::string(profile) + " " + priority);
      EXPECT_EQ(from_server.hardware_class(), local.hardware_class());
      EXPECT_EQ(from_server.weight_path().name(), local.weight_path().name());
      EXPECT_EQ(from_server.weight_path().path_id(), local.weight_path().path_id());
      EXPECT_EQ(from_server.engine_kwargs().DebugString(), local.engine_kwargs().DebugString());
      EXPECT_EQ(from_server.effective_priority(), local.effective_priority());
      EXPECT_EQ(from_server.policy_version(), local.policy_version());
      // Only the server knows where the build lives (the embedded demo catalog).
      EXPECT_EQ(from_server.artifact().uri(),
                "http://127.0.0.1:8765/Spark-X2.5-1.7B/" + from_server.weight_path().name() +
                    ".bin");
      EXPECT_EQ(from_server.artifact().sha256().size(), 64u);
      EXPECT_TRUE(local.artifact().uri().empty());
    }
  }
}

TEST_F(ResolveCliTest, ServerErrorsKeepTheirMeaning) {
  ProcessResult unknown_model =
      Ctl({"--server", server_->grpc_address(), "--profile", ExampleProfile("amd-zen4"),
           "--model", "no-such-model"});
  // The server refused a well-formed command line: 1, naming the code.
  EXPECT_EQ(unknown_model.exit_code, 1);
  EXPECT_THAT(unknown_model.err, HasSubstr("ResolveWeightPath: NOT_FOUND: "));
  EXPECT_THAT(unknown_model.err, HasSubstr("Spark-X2.5-1.7B"));

  ProcessResult bad_device = Ctl({"--server", server_->grpc_address(), "--profile",
                                  ExampleProfile("amd-zen4"), "--device-id", std::string(300, 'x')});
  EXPECT_EQ(bad_device.exit_code, 1);
  EXPECT_THAT(bad_device.err, HasSubstr("ResolveWeightPath: INVALID_ARGUMENT: device_id"));

  ProcessResult both = Ctl({"--server", server_->grpc_address(), "--offline", "--profile",
                            ExampleProfile("amd-zen4")});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("exclude each other"));

  ProcessResult policy_remote = Ctl({"--server", server_->grpc_address(), "--profile",
                                     ExampleProfile("amd-zen4"), "--policy", "x.yaml"});
  EXPECT_EQ(policy_remote.exit_code, 2);
  EXPECT_THAT(policy_remote.err, HasSubstr("--policy applies to --offline only"));
}

TEST(ResolveCliNoServerTest, UnreachableServerIsAFailureNotBadInput) {
  ProcessResult result = RunProcess({WEIGHTPATHCTL_PATH, "resolve", "--server", "127.0.0.1:1",
                                     "--timeout", "2", "--profile", ExampleProfile("amd-zen4")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("ResolveWeightPath"));
}

}  // namespace
}  // namespace weightpath::server::testing
