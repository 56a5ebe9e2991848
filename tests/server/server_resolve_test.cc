// ResolveWeightPath against the real server binary over loopback gRPC:
// decisions, health, metrics, and the answers to bad requests.
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_violation.h"
#include "common/grpc_status.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "policy/profile_json.h"
#include "server/config/catalog.h"
#include "server/config/demo_catalog.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::server::testing {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

class ServerResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = ServerProcess::Start({});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    channel_ = PlaintextChannel(server_->grpc_address());
    stub_ = v1::WeightPath::NewStub(channel_);
  }

  std::string Scrape() {
    absl::StatusOr<std::string> text = HttpGet(server_->metrics_address(), "/metrics");
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : std::string();
  }

  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WeightPath::Stub> stub_;
};

// The seed's selector reduced to the name it picks: an anchor independent
// of the policy document, so a policy that drifted from the seed is caught
// even though the rest of the comparison goes through the policy library.
std::string SeedPathName(const v1::HardwareProfile& profile, v1::Priority priority) {
  const std::string& accelerator = profile.accelerator();
  if (accelerator.rfind("npu", 0) == 0) return "export-qnn-w8a16";
  if (accelerator == "cuda_discrete" || accelerator == "cuda_unified") {
    return profile.supports_bf16() ? "bf16" : "fp16";
  }
  if (profile.arch() == "aarch64") return "w4a16-tinygemm";
  bool amx = false;
  for (const std::string& flag : profile.cpu_flags()) {
    amx = amx || flag == "amx_tile" || flag == "amx_bf16";
  }
  const bool speed = priority != v1::PRIORITY_FIDELITY;
  return profile.arch() == "x86_64" && amx && speed ? "w4a8-amx" : "w4a16-tinygemm";
}

std::map<std::string, v1::HardwareProfile> GoldenProfiles() {
  std::map<std::string, v1::HardwareProfile> profiles;
  for (const auto& entry :
       std::filesystem::directory_iterator(WEIGHTPATH_SOURCE_DIR "/examples/profiles")) {
    if (entry.path().extension() != ".json") continue;
    absl::StatusOr<v1::HardwareProfile> profile =
        policy::ParseProfileJson(ReadFileOrDie(entry.path()), entry.path().string());
    EXPECT_TRUE(profile.ok()) << profile.status();
    if (profile.ok()) profiles[entry.path().stem().string()] = *profile;
  }
  // Branches the example machines do not reach.
  v1::HardwareProfile amx_bf16_only;
  amx_bf16_only.set_arch("x86_64");
  amx_bf16_only.add_cpu_flags("avx512f");
  amx_bf16_only.add_cpu_flags("amx_bf16");
  profiles["x86-amx_bf16-without-amx_tile"] = amx_bf16_only;
  v1::HardwareProfile arm_with_amx_names;
  arm_with_amx_names.set_arch("aarch64");
  arm_with_amx_names.add_cpu_flags("asimd");
  arm_with_amx_names.add_cpu_flags("amx_tile");
  profiles["aarch64-with-amx-named-flags"] = arm_with_amx_names;
  v1::HardwareProfile jetson_fp16;
  jetson_fp16.set_arch("aarch64");
  jetson_fp16.set_accelerator("cuda_unified");
  profiles["jetson-without-bf16"] = jetson_fp16;
  v1::HardwareProfile other_npu;
  other_npu.set_arch("aarch64");
  other_npu.set_accelerator("npu:mediatek");
  profiles["npu-mediatek"] = other_npu;
  return profiles;
}

TEST_F(ServerResolveTest, EveryGoldenProfileGetsThePolicyLibrarysDecision) {
  const std::shared_ptr<const policy::Policy> policy = policy::DefaultPolicy();
  absl::StatusOr<std::shared_ptr<const Catalog>> catalog =
      LoadCatalog(testing::SingleFileCatalogYaml(), kDemoCatalogSourceName, *policy);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  const std::map<std::string, v1::HardwareProfile> profiles = GoldenProfiles();
  ASSERT_GE(profiles.size(), 12u);

  for (const auto& [name, profile] : profiles) {
    for (v1::Priority priority :
         {v1::PRIORITY_UNSPECIFIED, v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
      SCOPED_TRACE(absl::StrCat(name, " priority=", v1::Priority_Name(priority)));
      v1::ResolveWeightPathRequest request;
      request.set_device_id("golden-" + name);
      *request.mutable_profile() = profile;
      request.set_priority(priority);
      v1::ResolveWeightPathResponse response;
      const grpc::Status status = CallResolve(*stub_, request, &response);
      ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();

      absl::StatusOr<policy::Decision> decision =
          policy::Evaluate(*policy, profile, priority, request.labels());
      ASSERT_TRUE(decision.ok()) << decision.status();
      EXPECT_EQ(response.weight_path().name(), SeedPathName(profile, priority));
      EXPECT_EQ(response.hardware_class(), policy::HardwareClassName(decision->hardware_class));
      EXPECT_EQ(response.effective_priority(), decision->effective_priority);
      EXPECT_EQ(response.policy_version(), policy->version());
      EXPECT_EQ(response.matched_rule(), decision->rule->name);
      EXPECT_EQ(response.model(), "Spark-X2.5-1.7B");

      v1::WeightPathSpec expected_spec;
      policy::FillWeightPathSpec(*decision->path, &expected_spec);
      v1::WeightPathSpec served_spec = response.weight_path();
      EXPECT_EQ(served_spec.verified(), decision->path->verified);
      EXPECT_EQ(served_spec.verification().source(), decision->path->verified
                                                         ? v1::Verification::SOURCE_POLICY
                                                         : v1::Verification::SOURCE_NONE);
      served_spec.clear_verification();
      expected_spec.clear_verification();
      expected_spec.set_verified(decision->path->verified);
      EXPECT_TRUE(MessageDifferencer::Equals(served_spec, expected_spec))
          << "served:\n" << served_spec.DebugString() << "expected:\n" << expected_spec.DebugString();

      google::protobuf::Struct expected_kwargs;
      policy::FillEngineKwargs(*decision->path, &expected_kwargs);
      EXPECT_TRUE(MessageDifferencer::Equals(response.engine_kwargs(), expected_kwargs))
          << response.engine_kwargs().DebugString();

      const CatalogArtifact& artifact =
          (*catalog)->FindModel("Spark-X2.5-1.7B")->at(response.weight_path().name());
      EXPECT_EQ(response.artifact().uri(), artifact.uri);
      EXPECT_EQ(response.artifact().sha256(), artifact.sha256);
      EXPECT_EQ(response.artifact().size_bytes(), artifact.size_bytes);
      EXPECT_EQ(response.artifact().version(), artifact.version);
    }
  }
}

TEST_F(ServerResolveTest, ExplicitModelAndEngineKwargsForTheAmxPath) {
  v1::ResolveWeightPathRequest request = AmxRequest();
  request.set_model("Spark-X2.5-1.7B");
  v1::ResolveWeightPathResponse response;
  ASSERT_TRUE(CallResolve(*stub_, request, &response).ok());
  EXPECT_EQ(response.weight_path().name(), "w4a8-amx");
  EXPECT_EQ(response.artifact().uri(), "http://127.0.0.1:8765/Spark-X2.5-1.7B/w4a8-amx.bin");
  ASSERT_EQ(response.engine_kwargs().fields().count("quantization"), 1u);
  EXPECT_EQ(response.engine_kwargs().fields().at("quantization").string_value(), "gptq");
}

// --resolve_interval is what a device no rollout selects is told; the
// default is an hour.
TEST_F(ServerResolveTest, TheSteadyResolveIntervalIsTheServersFlag) {
  v1::ResolveWeightPathResponse response;
  ASSERT_TRUE(CallResolve(*stub_, AmxRequest(), &response).ok());
  EXPECT_EQ(response.resolve_interval_seconds(), 3600u);

  auto server = testing::ServerProcess::Start({"--resolve_interval=10m"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::WeightPath::NewStub(PlaintextChannel((*server)->grpc_address()));
  ASSERT_TRUE(CallResolve(*stub, AmxRequest(), &response).ok());
  EXPECT_EQ(response.resolve_interval_seconds(), 600u);
  // And a value the server cannot use stops the start, naming the flag.
  const testing::ExitResult refused =
      testing::ServerProcess::RunToExit({"--resolve_interval=5s"}, absl::Seconds(30));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.log, HasSubstr("--resolve_interval: 5s is outside 30s..24h"));
}

TEST_F(ServerResolveTest, HealthIsServingForTheServerAndTheService) {
  grpc::Status status;
  EXPECT_EQ(CheckHealth(channel_, "", &status), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(CheckHealth(channel_, "weightpath.v1.WeightPath", &status),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(status.ok()) << status.error_message();
  CheckHealth(channel_, "no.such.Service", &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

struct BadRequestCase {
  std::string name;
  std::function<void(v1::ResolveWeightPathRequest*)> spoil;
  grpc::StatusCode code;
  std::string message_has;
};

TEST_F(ServerResolveTest, BadRequestsGetTheRightCodeAndNameTheField) {
  const std::vector<BadRequestCase> cases = {
      {"missing device_id", [](auto* r) { r->clear_device_id(); },
       grpc::StatusCode::INVALID_ARGUMENT, "device_id"},
      {"oversized device_id", [](auto* r) { r->set_device_id(std::string(257, 'd')); },
       grpc::StatusCode::INVALID_ARGUMENT, "device_id"},
      {"device_id with a space", [](auto* r) { r->set_device_id("dev 1"); },
       grpc::StatusCode::INVALID_ARGUMENT, "device_id"},
      {"no profile", [](auto* r) { r->clear_profile(); }, grpc::StatusCode::INVALID_ARGUMENT,
       "profile"},
      {"riscv64 without accelerator", [](auto* r) { r->mutable_profile()->set_arch("riscv64"); },
       grpc::StatusCode::INVALID_ARGUMENT, "profile.arch"},
      {"empty arch without accelerator",
       [](auto* r) {
         r->mutable_profile()->clear_arch();
         r->mutable_profile()->clear_accelerator();
       },
       grpc::StatusCode::INVALID_ARGUMENT, "profile.arch"},
      {"4097 cpu flags",
       [](auto* r) {
         for (int i = 0; i < 4097; ++i) r->mutable_profile()->add_cpu_flags("f");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "profile.cpu_flags"},
      {"cpu_model over 256 bytes",
       [](auto* r) { r->mutable_profile()->set_cpu_model(std::string(257, 'x')); },
       grpc::StatusCode::INVALID_ARGUMENT, "profile.cpu_model"},
      {"one flag over 256 bytes",
       [](auto* r) { r->mutable_profile()->add_cpu_flags(std::string(300, 'f')); },
       grpc::StatusCode::INVALID_ARGUMENT, "profile.cpu_flags[5]"},
      {"accelerator entry name over 256 bytes",
       [](auto* r) { r->mutable_profile()->add_accelerators()->set_name(std::string(300, 'n')); },
       grpc::StatusCode::INVALID_ARGUMENT, "profile.accelerators[0].name"},
      {"label value over 256 bytes",
       [](auto* r) { (*r->mutable_labels())["workload"] = std::string(300, 'a'); },
       grpc::StatusCode::INVALID_ARGUMENT, "labels[\"workload\"]"},
      {"priority out of range",
       [](auto* r) { r->set_priority(static_cast<v1::Priority>(7)); },
       grpc::StatusCode::INVALID_ARGUMENT, "priority"},
      {"unknown model", [](auto* r) { r->set_model("Nope-7B"); }, grpc::StatusCode::NOT_FOUND,
       "known models: Spark-X2.5-1.7B"},
  };
  for (const BadRequestCase& test_case : cases) {
    SCOPED_TRACE(test_case.name);
    v1::ResolveWeightPathRequest request = AmxRequest();
    test_case.spoil(&request);
    v1::ResolveWeightPathResponse response;
    const grpc::Status status = CallResolve(*stub_, request, &response);
    EXPECT_EQ(status.error_code(), test_case.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(test_case.message_has));
  }
  // Zero logical CPUs with flags present is a profile the probe can write.
  v1::ResolveWeightPathRequest zero_cpus = AmxRequest();
  zero_cpus.mutable_profile()->set_n_logical(0);
  v1::ResolveWeightPathResponse response;
  EXPECT_TRUE(CallResolve(*stub_, zero_cpus, &response).ok());
}

// The field travels as a google.rpc.BadRequest detail (grpc-status-details-bin)
// and comes back out of the client's conversion as the same field, whatever
// the message says.
TEST_F(ServerResolveTest, BadRequestsNameTheFieldInTheStatusDetails) {
  const std::vector<std::pair<std::function<void(v1::ResolveWeightPathRequest*)>, std::string>>
      cases = {
          {[](auto* r) { r->clear_device_id(); }, "device_id"},
          {[](auto* r) { r->set_device_id("dev 1"); }, "device_id"},
          {[](auto* r) { r->clear_profile(); }, "profile"},
          {[](auto* r) { r->mutable_profile()->set_arch("riscv64"); }, "profile.arch"},
          {[](auto* r) {
             for (int i = 0; i < 4097; ++i) r->mutable_profile()->add_cpu_flags("f");
           },
           "profile.cpu_flags"},
          {[](auto* r) { r->mutable_profile()->add_cpu_flags(std::string(300, 'f')); },
           "profile.cpu_flags[5]"},
          {[](auto* r) { r->mutable_profile()->add_accelerators()->set_name(std::string(300, 'n')); },
           "profile.accelerators[0].name"},
          {[](auto* r) { (*r->mutable_labels())["workload"] = std::string(300, 'a'); },
           "labels[\"workload\"]"},
          {[](auto* r) { r->set_priority(static_cast<v1::Priority>(7)); }, "priority"},
          {[](auto* r) { r->set_known_decision_etag("XYZ"); }, "known_decision_etag"},
      };
  for (const auto& [spoil, field] : cases) {
    SCOPED_TRACE(field);
    v1::ResolveWeightPathRequest request = AmxRequest();
    spoil(&request);
    v1::ResolveWeightPathResponse response;
    auto context = ContextWithDeadline();
    const absl::Status status = FromGrpcStatus(
        "ResolveWeightPath", stub_->ResolveWeightPath(context.get(), request, &response), *context);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(ViolatedField(status), field) << status;
  }
  // NOT_FOUND for a model is not a malformed field: no detail.
  v1::ResolveWeightPathRequest unknown_model = AmxRequest();
  unknown_model.set_model("Nope-7B");
  v1::ResolveWeightPathResponse response;
  auto context = ContextWithDeadline();
  const absl::Status not_found = FromGrpcStatus(
      "ResolveWeightPath", stub_->ResolveWeightPath(context.get(), unknown_model, &response),
      *context);
  EXPECT_EQ(not_found.code(), absl::StatusCode::kNotFound) << not_found;
  EXPECT_EQ(ViolatedField(not_found), std::nullopt);

  v1::ReportMeasurementResponse report_response;
  auto report_context = ContextWithDeadline();
  const absl::Status report = FromGrpcStatus(
      "ReportMeasurement",
      stub_->ReportMeasurement(report_context.get(), v1::ReportMeasurementRequest(),
                               &report_response),
      *report_context);
  EXPECT_EQ(ViolatedField(report), "idempotency_key") << report;
}

TEST_F(ServerResolveTest, OversizedMessageIsRefusedAndTheServerKeepsAnswering) {
  v1::ResolveWeightPathRequest huge = AmxRequest();
  huge.mutable_profile()->set_cpu_model(std::string(100 * 1024, 'x'));
  v1::ResolveWeightPathResponse response;
  EXPECT_EQ(CallResolve(*stub_, huge, &response).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  const grpc::Status after = CallResolve(*stub_, AmxRequest(), &response);
  EXPECT_TRUE(after.ok()) << after.error_message();
  EXPECT_EQ(response.weight_path().name(), "w4a8-amx");
}

// The attack: a 61 KB gzip of 60 MB of zeros. The server must refuse the
// compressed message instead of inflating it, and keep answering.
TEST_F(ServerResolveTest, ACompressedRequestIsRefusedWithoutBeingInflated) {
  v1::ResolveWeightPathRequest bomb = AmxRequest();
  bomb.mutable_profile()->set_cpu_model(std::string(60 * 1024 * 1024, '\0'));
  for (grpc_compression_algorithm algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxSendMessageSize(-1);
    auto stub = v1::WeightPath::NewStub(grpc::CreateCustomChannel(
        server_->grpc_address(), grpc::InsecureChannelCredentials(), arguments));
    auto context = ContextWithDeadline(30);
    context->set_compression_algorithm(algorithm);
    v1::ResolveWeightPathResponse response;
    const grpc::Status refused = stub->ResolveWeightPath(context.get(), bomb, &response);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNIMPLEMENTED) << refused.error_message();
    EXPECT_THAT(refused.error_message(), HasSubstr("disabled"));
  }
  v1::ResolveWeightPathResponse response;
  const grpc::Status after = CallResolve(*stub_, AmxRequest(), &response);
  EXPECT_TRUE(after.ok()) << after.error_message();
}

// ReportMeasurement is served now (tests/server/fleet_server_test.cc); an
// empty one is refused before it reaches the store.
TEST_F(ServerResolveTest, AnEmptyReportIsRefusedNamingTheMissingField) {
  v1::ReportMeasurementRequest request;
  v1::ReportMeasurementResponse response;
  auto context = ContextWithDeadline();
  const grpc::Status status = stub_->ReportMeasurement(context.get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("idempotency_key"));
}

double SampleOrZero(const std::string& text, const std::string& series) {
  absl::StatusOr<double> value = SampleValue(text, series);
  EXPECT_TRUE(value.ok() || absl::IsNotFound(value.status())) << value.status();
  return value.ok() ? *value : 0;
}

TEST_F(ServerResolveTest, MetricsCountExactlyTheCallsMade) {
  const std::string ok_series =
      "weightpath_resolve_requests_total{code=\"OK\",hardware_class=\"x86_cpu\","
      "path=\"w4a8-amx\",priority=\"speed\"}";
  const std::string fidelity_series =
      "weightpath_resolve_requests_total{code=\"OK\",hardware_class=\"x86_cpu\","
      "path=\"w4a16-tinygemm\",priority=\"fidelity\"}";
  const std::string invalid_series =
      "weightpath_resolve_requests_total{code=\"INVALID_ARGUMENT\",hardware_class=\"\","
      "path=\"\",priority=\"\"}";
  const std::string not_found_series =
      "weightpath_resolve_requests_total{code=\"NOT_FOUND\",hardware_class=\"x86_cpu\","
      "path=\"w4a8-amx\",priority=\"speed\"}";
  const std::string count_series = "weightpath_resolve_duration_seconds_count";
  const std::string before = Scrape();
  EXPECT_THAT(before, HasSubstr("weightpath_build_info{version=\""));
  EXPECT_THAT(before, HasSubstr(absl::StrCat("weightpath_policy_info{catalog_version=\"sha256:",
                                             "")));
  EXPECT_THAT(before, HasSubstr(policy::DefaultPolicy()->version()));

  v1::ResolveWeightPathResponse response;
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(CallResolve(*stub_, AmxRequest(), &response).ok());
  v1::ResolveWeightPathRequest fidelity = AmxRequest();
  fidelity.set_priority(v1::PRIORITY_FIDELITY);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(CallResolve(*stub_, fidelity, &response).ok());
  v1::ResolveWeightPathRequest invalid = AmxRequest("");
  for (int i = 0; i < 2; ++i) CallResolve(*stub_, invalid, &response);
  v1::ResolveWeightPathRequest unknown_model = AmxRequest();
  unknown_model.set_model("Nope-7B");
  CallResolve(*stub_, unknown_model, &response);

  const std::string after = Scrape();
  EXPECT_EQ(SampleOrZero(after, ok_series) - SampleOrZero(before, ok_series), 7);
  EXPECT_EQ(SampleOrZero(after, fidelity_series) - SampleOrZero(before, fidelity_series), 3);
  EXPECT_EQ(SampleOrZero(after, invalid_series) - SampleOrZero(before, invalid_series), 2);
  EXPECT_EQ(SampleOrZero(after, not_found_series) - SampleOrZero(before, not_found_series), 1);
  EXPECT_EQ(SampleOrZero(after, count_series) - SampleOrZero(before, count_series), 13);
  // Device ids never become label values.
  EXPECT_THAT(after, ::testing::Not(HasSubstr("device-1")));
}

}  // namespace
}  // namespace weightpath::server::testing
