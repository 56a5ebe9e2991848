// A pinned canary build, end to end as ctl/README.md ("A canary build")
// walks an operator through it: the real weightpathctl signs a second build
// of one weight path as a canary into a TUF repository the real
// weightpath-server serves its catalog from; a rollout pins it by its target
// path alone; a member device is sent the signed canary, every other device
// the path's default build.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"

namespace weightpath::server::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using weightpath::testing::ProcessResult;
using weightpath::testing::RunProcess;

constexpr char kModel[] = "Spark-X2.5-1.7B";
constexpr char kMirror[] = "http://mirror.test/artifacts";
constexpr char kCanary[] = "models/spark/w4a8-amx/2026.12.2.bin";

std::string DefaultTarget(const std::string& weight_path) {
  return absl::StrCat("models/spark/", weight_path, "/2026.11.1.bin");
}

class CtlCanaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_.File("repo");
    keys_ = dir_.File("keys");
    ASSERT_EQ(Ctl({"repo", "init", "--repo", repo_, "--generate-keys", keys_}).exit_code, 0);
    // One build per path the policy can return; the model named once, the
    // later builds take it from the targets.
    bool first = true;
    for (const std::string& path : policy::DefaultPolicy()->ReachablePathNames()) {
      std::vector<std::string> args = {
          "repo", "add-target", "--repo", repo_, "--path", DefaultTarget(path), "--length",
          "262144", "--sha256", std::string(64, 'a'), "--weight-path", path, "--version",
          "2026.11.1", "--hardware-classes", "x86_cpu,arm64_cpu,cuda_discrete,jetson,npu_phone"};
      if (first) args.insert(args.end(), {"--model", kModel});
      first = false;
      ProcessResult added = Ctl(args);
      ASSERT_EQ(added.exit_code, 0) << added.err;
    }
    Publish();
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    auto started = ServerProcess::Start(
        {"--catalog=" + repo_, "--catalog_root=" + repo_ + "/metadata/1.root.json",
         std::string("--catalog_artifact_url=") + kMirror + "/",
         "--catalog_state_dir=" + dir_.File("state"), "--reload_interval=0",
         "--store=sqlite:" + dir_.File("fleet.db"), "--admin_token_file=" + dir_.File("token"),
         "--fleet_refresh_interval=100ms"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    stub_ = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
  }

  ProcessResult Ctl(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }
  ProcessResult Admin(std::vector<std::string> args) const {
    args.insert(args.end(), {"--server", server_->grpc_address(), "--token-file", dir_.File("token")});
    return Ctl(args);
  }

  void Publish() {
    ProcessResult signed_targets = Ctl({"repo", "sign", "--repo", repo_, "--role", "targets",
                                        "--key", keys_ + "/targets.pem"});
    ASSERT_EQ(signed_targets.exit_code, 0) << signed_targets.err;
    ProcessResult published =
        Ctl({"repo", "timestamp", "--repo", repo_, "--key", keys_ + "/timestamp.pem",
             "--snapshot-key", keys_ + "/snapshot.pem"});
    ASSERT_EQ(published.exit_code, 0) << published.err;
  }

  // The server's answer for an AMX device (w4a8-amx) with `labels`.
  v1::ResolveWeightPathResponse Resolve(const std::string& device_id,
                                        const std::map<std::string, std::string>& labels) {
    v1::ResolveWeightPathRequest request = AmxRequest(device_id);
    for (const auto& [key, value] : labels) (*request.mutable_labels())[key] = value;
    v1::ResolveWeightPathResponse response;
    const grpc::Status status = CallResolve(*stub_, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  TempDir dir_;
  std::string repo_, keys_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::WeightPath::Stub> stub_;
};

TEST_F(CtlCanaryTest, ASignedCanaryReachesTheRolloutsMembersAndNoOtherDevice) {
  // 1. Sign the second build of w4a8-amx as a canary and publish it. Without
  //    --canary weightpathctl refuses it: the catalog serves one build of a
  //    path to every device.
  const std::vector<std::string> canary = {
      "repo", "add-target", "--repo", repo_, "--path", kCanary, "--length", "262145",
      "--sha256", std::string(64, 'b'), "--weight-path", "w4a8-amx", "--version", "2026.12.2",
      "--hardware-classes", "x86_cpu"};
  ProcessResult refused = Ctl(canary);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("add this one with --canary"));
  std::vector<std::string> with_flag = canary;
  with_flag.push_back("--canary");
  ProcessResult added = Ctl(with_flag);
  ASSERT_EQ(added.exit_code, 0) << added.err;
  EXPECT_THAT(added.out, HasSubstr(absl::StrCat("artifact: {target_path: ", kCanary, "}")));
  Publish();
  // A device verifies the canary as it verifies any target: signed, for its class.
  ProcessResult verified = Ctl({"repo", "verify", "--repo", repo_, "--target", kCanary});
  ASSERT_EQ(verified.exit_code, 0) << verified.err;
  EXPECT_THAT(verified.out, AllOf(HasSubstr("\"canary\":true"), HasSubstr("\"x86_cpu\"")));

  // 2. The server takes the repository with two builds of one path.
  server_->Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<std::string> text = HttpGet(server_->metrics_address(), "/metrics");
    return text.ok() &&
           SampleValue(*text, "weightpath_policy_reloads_total{result=\"success\"}").value_or(0) >=
               1;
  })) << server_->Log();
  EXPECT_THAT(server_->Log(), Not(HasSubstr("catalog refused")));
  EXPECT_EQ(Resolve("amx-before", {{"ring", "canary"}}).artifact().target_path(),
            DefaultTarget("w4a8-amx"))
      << "no rollout yet: the canary reaches no one";

  // 3. A rollout pins it by its target path alone.
  const std::string rollout = dir_.File("canary.yaml");
  WriteFileOrDie(rollout, absl::StrCat("id: w4a8-canary\n"
                                       "selector: {match_labels: {ring: canary}}\n"
                                       "action:\n"
                                       "  pin_artifact:\n"
                                       "    path: w4a8-amx\n"
                                       "    artifact: {target_path: ", kCanary, "}\n"
                                       "stages: [{percent: 100, report_timeout_seconds: 3600}]\n"));
  ProcessResult applied = Admin({"apply", "-f", rollout});
  ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;
  ProcessResult status = Admin({"rollout", "status", "w4a8-canary"});
  EXPECT_THAT(status.out, HasSubstr(absl::StrCat("pin artifact of w4a8-amx to signed target ", kCanary)));

  // 4. A member is sent the signed canary, as the catalog would send it...
  ASSERT_TRUE(Eventually([&] {
    return Resolve("amx-canary-1", {{"ring", "canary"}}).artifact().target_path() == kCanary;
  })) << server_->Log();
  const v1::ResolveWeightPathResponse member = Resolve("amx-canary-1", {{"ring", "canary"}});
  EXPECT_EQ(member.rollout().rollout_id(), "w4a8-canary");
  EXPECT_EQ(member.weight_path().name(), "w4a8-amx");
  EXPECT_EQ(member.artifact().uri(), absl::StrCat(kMirror, "/", kCanary));
  EXPECT_EQ(member.artifact().sha256(), std::string(64, 'b'));
  EXPECT_EQ(member.artifact().size_bytes(), 262145u);
  EXPECT_EQ(member.artifact().version(), "2026.12.2");
  EXPECT_TRUE(member.artifact().signed_target());

  // ...and every other device the path's default build.
  const v1::ResolveWeightPathResponse other = Resolve("amx-2", {{"ring", "stable"}});
  EXPECT_EQ(other.rollout().rollout_id(), "");
  EXPECT_EQ(other.artifact().target_path(), DefaultTarget("w4a8-amx"));
  EXPECT_EQ(other.artifact().version(), "2026.11.1");
  EXPECT_TRUE(other.artifact().signed_target());

  // An operator's dry run shows the same split.
  const std::string profile =
      absl::StrCat(WEIGHTPATH_EXAMPLE_PROFILES_DIR, "/intel-sapphire-rapids.json");
  ProcessResult pinned = Ctl({"resolve", "--server", server_->grpc_address(), "--profile", profile,
                              "--labels", "ring=canary", "-o", "json"});
  ASSERT_EQ(pinned.exit_code, 0) << pinned.err;
  EXPECT_THAT(pinned.out, HasSubstr(kCanary));
  ProcessResult unpinned = Ctl({"resolve", "--server", server_->grpc_address(), "--profile",
                                profile, "-o", "json"});
  ASSERT_EQ(unpinned.exit_code, 0) << unpinned.err;
  EXPECT_THAT(unpinned.out, AllOf(HasSubstr(DefaultTarget("w4a8-amx")), Not(HasSubstr(kCanary))));
}

}  // namespace
}  // namespace weightpath::server::testing
