// Re-resolves against the real server binary: the decision etag is the same
// across calls and replicas, changes exactly when something a device acts
// on changes (policy, catalog, rollout stage), and a device that sends the
// etag of the decision it holds gets a few bytes saying "unchanged", while
// the registry still sees it.
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "policy/profile_json.h"
#include "server/config/demo_catalog.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;
using Response = v1::ResolveWeightPathResponse;

constexpr absl::Duration kChangeTimeout = absl::Seconds(30);

// The answer's bytes as they came off the wire, for size and field checks.
std::string RawResolve(const std::shared_ptr<grpc::Channel>& channel,
                       const v1::ResolveWeightPathRequest& request) {
  grpc::GenericStub stub(channel);
  const std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer sent(&slice, 1);
  grpc::ByteBuffer received;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, "/weightpath.v1.WeightPath/ResolveWeightPath", grpc::StubOptions(), &sent,
                 &received, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mutex);
                   status = std::move(s);
                   done = true;
                   done_cv.notify_one();
                 });
  std::unique_lock<std::mutex> lock(mutex);
  done_cv.wait(lock, [&] { return done; });
  EXPECT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(received.Dump(&slices).ok());
  std::string wire;
  for (const grpc::Slice& each : slices) {
    wire.append(reinterpret_cast<const char*>(each.begin()), each.size());
  }
  return wire;
}

v1::ResolveWeightPathRequest SeedStyleRequest(const std::string& device_id) {
  v1::ResolveWeightPathRequest request;
  request.set_device_id(device_id);
  absl::StatusOr<v1::HardwareProfile> profile = policy::ParseProfileJson(
      ReadFileOrDie(WEIGHTPATH_SOURCE_DIR "/examples/profiles/intel-sapphire-rapids.json"),
      "intel-sapphire-rapids.json");
  EXPECT_TRUE(profile.ok()) << profile.status();
  if (profile.ok()) *request.mutable_profile() = *profile;
  return request;
}

Response ResolveOk(v1::WeightPath::Stub& stub, const v1::ResolveWeightPathRequest& request) {
  Response response;
  const grpc::Status status = CallResolve(stub, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

TEST(ServerEtagTest, StableAcrossCallsAndReplicasAndTheUnchangedAnswerIsSmall) {
  auto first = ServerProcess::Start({"--store=none"});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ServerProcess::Start({"--store=none"});
  ASSERT_TRUE(second.ok()) << second.status();
  const auto channel = PlaintextChannel((*first)->grpc_address());
  auto stub = v1::WeightPath::NewStub(channel);
  auto replica = v1::WeightPath::NewStub(PlaintextChannel((*second)->grpc_address()));

  for (const v1::ResolveWeightPathRequest& base : {AmxRequest("lab-01"), SeedStyleRequest("lab-02")}) {
    const Response full = ResolveOk(*stub, base);
    ASSERT_EQ(full.decision_etag().size(), 32u);
    EXPECT_FALSE(full.unchanged());
    EXPECT_EQ(ResolveOk(*stub, base).decision_etag(), full.decision_etag());
    EXPECT_EQ(ResolveOk(*replica, base).decision_etag(), full.decision_etag());

    v1::ResolveWeightPathRequest again = base;
    again.set_known_decision_etag(full.decision_etag());
    const std::string wire = RawResolve(channel, again);
    EXPECT_LE(wire.size(), 120u) << "unchanged answer of " << wire.size() << " bytes";
    google::protobuf::UnknownFieldSet fields;
    ASSERT_TRUE(fields.ParseFromString(wire));
    std::vector<int> numbers;
    for (int i = 0; i < fields.field_count(); ++i) numbers.push_back(fields.field(i).number());
    EXPECT_THAT(numbers, ::testing::ElementsAre(Response::kPolicyVersionFieldNumber,
                                                Response::kResolveIntervalSecondsFieldNumber,
                                                Response::kDecisionEtagFieldNumber,
                                                Response::kUnchangedFieldNumber));
    Response unchanged;
    ASSERT_TRUE(unchanged.ParseFromString(wire));
    EXPECT_TRUE(unchanged.unchanged());
    EXPECT_EQ(unchanged.decision_etag(), full.decision_etag());
    EXPECT_EQ(unchanged.policy_version(), full.policy_version());
    EXPECT_EQ(unchanged.resolve_interval_seconds(), full.resolve_interval_seconds());

    // An etag of some other decision gets the full answer.
    again.set_known_decision_etag(std::string(32, '0'));
    const Response other = ResolveOk(*stub, again);
    EXPECT_FALSE(other.unchanged());
    EXPECT_EQ(other.weight_path().name(), full.weight_path().name());
  }

  absl::StatusOr<std::string> metrics = HttpGet((*first)->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const absl::StatusOr<double> unchanged_total =
      SampleValue(*metrics, "weightpath_resolve_unchanged_total");
  ASSERT_TRUE(unchanged_total.ok()) << unchanged_total.status();
  EXPECT_EQ(*unchanged_total, 2.0);
}

TEST(ServerEtagTest, AMalformedKnownEtagIsRefusedNamingTheField) {
  auto server = ServerProcess::Start({"--store=none"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::WeightPath::NewStub(PlaintextChannel((*server)->grpc_address()));
  for (const std::string& etag : {std::string("NOT-HEX"), std::string(65, 'a')}) {
    v1::ResolveWeightPathRequest request = AmxRequest();
    request.set_known_decision_etag(etag);
    Response response;
    const grpc::Status status = CallResolve(*stub, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("known_decision_etag"));
  }
}

// Replaces `path` by rename, as editors and config tools do.
void ReplaceFile(const std::string& path, const std::string& contents) {
  WriteFileOrDie(path + ".tmp", contents);
  ASSERT_EQ(rename((path + ".tmp").c_str(), path.c_str()), 0);
}

TEST(ServerEtagTest, PolicyAndCatalogChangesChangeTheEtagOnlyWhenTheDecisionChanges) {
  TempDir dir;
  const std::string policy_path = dir.File("policy.yaml");
  const std::string catalog_path = dir.File("catalog.yaml");
  const std::string policy_text(policy::DefaultPolicyYaml());
  const std::string catalog_text = testing::SingleFileCatalogYaml();
  WriteFileOrDie(policy_path, policy_text);
  WriteFileOrDie(catalog_path, catalog_text);
  auto server = ServerProcess::Start({"--store=none", "--policy=" + policy_path,
                                      "--catalog=" + catalog_path, "--reload_interval=50ms"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::WeightPath::NewStub(PlaintextChannel((*server)->grpc_address()));
  v1::ResolveWeightPathRequest request = AmxRequest();
  const Response before = ResolveOk(*stub, request);
  ASSERT_EQ(before.weight_path().name(), "w4a8-amx");

  // A comment is a new policy version with the same decision: unchanged,
  // and the answer names the new version.
  ReplaceFile(policy_path, policy_text + "\n# reviewed again\n");
  Response reloaded;
  request.set_known_decision_etag(before.decision_etag());
  ASSERT_TRUE(Eventually(
      [&] {
        reloaded = ResolveOk(*stub, request);
        return reloaded.policy_version() != before.policy_version();
      },
      kChangeTimeout));
  EXPECT_TRUE(reloaded.unchanged());
  EXPECT_EQ(reloaded.decision_etag(), before.decision_etag());

  // A new build recipe for the path is a new decision.
  const std::string new_recipe = absl::StrReplaceAll(
      policy_text, {{"quantize_gptq_int4.py", "quantize_gptq_int4_v2.py"}});
  ASSERT_NE(new_recipe, policy_text);
  ReplaceFile(policy_path, new_recipe);
  Response rebuilt;
  ASSERT_TRUE(Eventually(
      [&] {
        rebuilt = ResolveOk(*stub, request);
        return !rebuilt.unchanged();
      },
      kChangeTimeout));
  EXPECT_NE(rebuilt.decision_etag(), before.decision_etag());
  EXPECT_EQ(rebuilt.weight_path().build_with(),
            "analysis/experiments/spark_edge/quantize_gptq_int4_v2.py");

  // So is a new artifact for it in the catalog.
  request.set_known_decision_etag(rebuilt.decision_etag());
  const std::string new_catalog = absl::StrReplaceAll(catalog_text, {{"demo-1", "demo-2"}});
  ASSERT_NE(new_catalog, catalog_text);
  ReplaceFile(catalog_path, new_catalog);
  Response recataloged;
  ASSERT_TRUE(Eventually(
      [&] {
        recataloged = ResolveOk(*stub, request);
        return !recataloged.unchanged();
      },
      kChangeTimeout));
  EXPECT_EQ(recataloged.artifact().version(), "demo-2");
  EXPECT_NE(recataloged.decision_etag(), rebuilt.decision_etag());
}

class ServerEtagFleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    auto started = ServerProcess::Start(
        {"--store=sqlite:" + dir_.File("fleet.db"), "--admin_token_file=" + dir_.File("token"),
         "--fleet_refresh_interval=100ms"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    auto channel = PlaintextChannel(server_->grpc_address());
    device_stub_ = v1::WeightPath::NewStub(channel);
    admin_stub_ = v1::FleetAdmin::NewStub(channel);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::WeightPath::Stub> device_stub_;
  std::unique_ptr<v1::FleetAdmin::Stub> admin_stub_;
};

TEST_F(ServerEtagFleetTest, AnUnchangedAnswerStillRecordsTheSighting) {
  const Response full = ResolveOk(*device_stub_, AmxRequest("first-device"));
  // Without a rollout the etag belongs to the decision, not the device, so
  // a second device of the same kind is answered "unchanged" at once.
  v1::ResolveWeightPathRequest second = AmxRequest("second-device");
  second.set_known_decision_etag(full.decision_etag());
  EXPECT_TRUE(ResolveOk(*device_stub_, second).unchanged());
  v1::Device device;
  EXPECT_TRUE(Eventually([&] {
    v1::GetDeviceRequest request;
    request.set_device_id("second-device");
    auto context = AdminContext();
    return admin_stub_->GetDevice(context.get(), request, &device).ok();
  }));
  EXPECT_EQ(device.path(), "w4a8-amx");
}

TEST_F(ServerEtagFleetTest, ARolloutStageChangesTheEtag) {
  v1::CreateRolloutRequest create;
  v1::Rollout* rollout = create.mutable_rollout();
  rollout->set_id("fidelity-soon");
  rollout->mutable_selector()->set_all(true);
  rollout->mutable_action()->set_set_priority(v1::PRIORITY_FIDELITY);
  for (uint32_t percent : {99u, 100u}) {
    v1::RolloutStage* stage = rollout->add_stages();
    stage->set_percent(percent);
    stage->set_report_timeout_seconds(3600);
  }
  v1::Rollout created;
  {
    auto context = AdminContext();
    const grpc::Status status = admin_stub_->CreateRollout(context.get(), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  // Most buckets are in at 99%: find a device the first stage shapes.
  Response shaped;
  v1::ResolveWeightPathRequest request;
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 20; ++i) {
      request = AmxRequest(absl::StrCat("rollout-device-", i));
      shaped = ResolveOk(*device_stub_, request);
      if (shaped.rollout().rollout_id() == "fidelity-soon") return true;
    }
    return false;
  }));
  EXPECT_EQ(shaped.rollout().stage(), 0u);
  EXPECT_EQ(ResolveOk(*device_stub_, request).decision_etag(), shaped.decision_etag());

  v1::RolloutControlRequest advance;
  advance.set_id("fidelity-soon");
  {
    auto context = AdminContext();
    v1::Rollout advanced;
    const grpc::Status status = admin_stub_->AdvanceRollout(context.get(), advance, &advanced);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  request.set_known_decision_etag(shaped.decision_etag());
  Response next;
  ASSERT_TRUE(Eventually([&] {
    next = ResolveOk(*device_stub_, request);
    return !next.unchanged();
  }));
  EXPECT_EQ(next.rollout().stage(), 1u);
  EXPECT_NE(next.decision_etag(), shaped.decision_etag());
}

}  // namespace
}  // namespace weightpath::server::testing
