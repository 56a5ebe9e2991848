#include "server/resolve/request_validation.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::server {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

v1::ResolveWeightPathRequest ValidRequest() {
  v1::ResolveWeightPathRequest request;
  request.set_device_id("edge-42");
  request.mutable_profile()->set_arch("aarch64");
  request.mutable_profile()->set_accelerator("none");
  return request;
}

TEST(ServerRequestValidationTest, AcceptsAValidRequestAndTheLimitsThemselves) {
  v1::ResolveWeightPathRequest request = ValidRequest();
  EXPECT_THAT(ValidateResolveRequest(request), IsOk());
  request.set_device_id(std::string(256, 'd'));
  request.mutable_profile()->set_cpu_model(std::string(256, 'm'));
  for (int i = 0; i < 4096; ++i) request.mutable_profile()->add_cpu_flags("f");
  (*request.mutable_labels())["workload"] = std::string(256, 'w');
  EXPECT_THAT(ValidateResolveRequest(request), IsOk());
  // A profile with an accelerator classifies whatever its CPU arch.
  v1::ResolveWeightPathRequest npu = ValidRequest();
  npu.mutable_profile()->set_arch("riscv64");
  npu.mutable_profile()->set_accelerator("npu:vendor");
  EXPECT_THAT(ValidateResolveRequest(npu), IsOk());
}

// Validation computes the hardware class once and hands it on; a request
// it refuses gets the same status either way.
TEST(ServerRequestValidationTest, ValidationReturnsTheClassItComputed) {
  v1::ResolveWeightPathRequest request = ValidRequest();
  EXPECT_THAT(ValidateAndClassifyResolveRequest(request),
              ::weightpath::testing::IsOkAndHolds(policy::HardwareClass::kArm64Cpu));
  request.mutable_profile()->set_accelerator("npu:vendor");
  EXPECT_THAT(ValidateAndClassifyResolveRequest(request),
              ::weightpath::testing::IsOkAndHolds(policy::HardwareClass::kNpuPhone));
  v1::ResolveWeightPathRequest riscv = ValidRequest();
  riscv.mutable_profile()->set_arch("riscv64");
  EXPECT_THAT(ValidateAndClassifyResolveRequest(riscv),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("profile.arch 'riscv64'")));
  EXPECT_EQ(ValidateAndClassifyResolveRequest(riscv).status(), ValidateResolveRequest(riscv));
  v1::ResolveWeightPathRequest no_id = ValidRequest();
  no_id.clear_device_id();
  EXPECT_EQ(ValidateAndClassifyResolveRequest(no_id).status(), ValidateResolveRequest(no_id));
}

// The memo's yes-or-no check of a request head agrees with the full
// validation for a bad byte at every position of ids of every length the
// four-byte steps and the tail cover.
TEST(ServerRequestValidationTest, RequestHeadCheckAgreesWithDeviceIdRules) {
  for (size_t length = 1; length <= 13; ++length) {
    for (size_t bad = 0; bad < length; ++bad) {
      for (const char c : {' ', '\n', '#', '\x7f'}) {
        std::string device_id(length, 'd');
        device_id[bad] = c;
        RequestHead head;
        head.device_id = device_id;
        EXPECT_FALSE(ValidateDeviceId(device_id).ok());
        EXPECT_FALSE(RequestHeadIsValid(head)) << "length " << length << ", byte " << bad;
      }
    }
    const std::string good(length, 'd');
    RequestHead head;
    head.device_id = good;
    EXPECT_TRUE(RequestHeadIsValid(head)) << "length " << length;
  }
  RequestHead head;
  head.device_id = "node-7.rack_2:slot/3@site+a=b";
  EXPECT_TRUE(RequestHeadIsValid(head));
  head.device_id = std::string(257, 'd');
  EXPECT_FALSE(RequestHeadIsValid(head));
  head.device_id = "";
  EXPECT_FALSE(RequestHeadIsValid(head));
}

TEST(ServerRequestValidationTest, DeviceIdRules) {
  EXPECT_THAT(ValidateDeviceId(""), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("device_id is required")));
  EXPECT_THAT(ValidateDeviceId(std::string(257, 'd')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device_id is 257 bytes")));
  EXPECT_THAT(ValidateDeviceId("dev\n1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at byte 3")));
  EXPECT_THAT(ValidateDeviceId("spiffe://fleet/edge-42.site_a@x+y=z"), IsOk());
}

TEST(ServerRequestValidationTest, EachOversizedFieldIsNamed) {
  struct Case {
    std::function<void(v1::ResolveWeightPathRequest*)> spoil;
    std::string field;
  };
  const std::string long_text(257, 'x');
  const std::vector<Case> cases = {
      {[&](auto* r) { r->set_model(long_text); }, "model is 257 bytes"},
      {[&](auto* r) { r->set_agent_version(long_text); }, "agent_version"},
      {[&](auto* r) { r->mutable_profile()->set_gpu_name(long_text); }, "profile.gpu_name"},
      {[&](auto* r) { r->mutable_profile()->set_host_os(long_text); }, "profile.host_os"},
      {[&](auto* r) { r->mutable_profile()->set_source(long_text); }, "profile.source"},
      {[&](auto* r) { r->mutable_profile()->set_accelerator(long_text); }, "profile.accelerator"},
      {[&](auto* r) {
         r->mutable_profile()->add_cpu_flags("ok");
         r->mutable_profile()->add_cpu_flags(long_text);
       },
       "profile.cpu_flags[1]"},
      {[&](auto* r) { r->mutable_profile()->add_probe_notes(long_text); },
       "profile.probe_notes[0]"},
      {[&](auto* r) {
         for (int i = 0; i < 65; ++i) r->mutable_profile()->add_probe_notes("n");
       },
       "profile.probe_notes has 65 entries"},
      {[&](auto* r) { r->mutable_profile()->add_accelerators()->set_driver(long_text); },
       "profile.accelerators[0].driver"},
      {[&](auto* r) {
         for (int i = 0; i < 65; ++i) r->mutable_profile()->add_accelerators();
       },
       "profile.accelerators has 65 entries"},
      {[&](auto* r) {
         for (int i = 0; i < 5; ++i) r->mutable_profile()->add_gpu_capability(8);
       },
       "profile.gpu_capability"},
      {[&](auto* r) {
         for (int i = 0; i < 65; ++i) r->mutable_profile()->add_gpus();
       },
       "profile.gpus has 65 entries"},
      {[&](auto* r) { r->mutable_profile()->add_gpus()->set_name(long_text); },
       "profile.gpus[0].name"},
      {[&](auto* r) {
         auto* gpu = r->mutable_profile()->add_gpus();
         for (int i = 0; i < 9; ++i) gpu->add_mig_instances();
       },
       "profile.gpus[0].mig_instances has 9"},
      {[&](auto* r) {
         r->mutable_profile()->add_gpus()->add_mig_instances()->set_profile(long_text);
       },
       "profile.gpus[0].mig_instances[0]"},
      {[&](auto* r) { r->mutable_profile()->set_cuda_visible_devices(long_text); },
       "profile.cuda_visible_devices"},
      {[&](auto* r) {
         for (int i = 0; i < 4097; ++i) r->mutable_profile()->add_clusters()->add_cpus(i);
       },
       "profile.clusters has 4097"},
      {[&](auto* r) {
         auto* cluster = r->mutable_profile()->add_clusters();
         for (int i = 0; i < 4097; ++i) cluster->add_cpus(i);
       },
       "profile.clusters[0].cpus"},
      {[&](auto* r) { (*r->mutable_labels())[long_text] = "v"; }, "labels has a key of 257"},
      {[&](auto* r) { (*r->mutable_labels())[""] = "v"; }, "labels has an empty key"},
      {[&](auto* r) {
         for (int i = 0; i < 65; ++i) (*r->mutable_labels())["k" + std::to_string(i)] = "v";
       },
       "labels has 65 entries"},
      {[&](auto* r) { r->mutable_profile()->set_arch("riscv64"); }, "profile.arch"},
      {[&](auto* r) { r->clear_profile(); }, "profile is required"},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.field);
    v1::ResolveWeightPathRequest request = ValidRequest();
    test_case.spoil(&request);
    EXPECT_THAT(ValidateResolveRequest(request),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(test_case.field)));
  }
}

TEST(ServerRequestValidationTest, ReportsHoldDeviceIdsToTheResolvesRules) {
  v1::ReportMeasurementRequest measurement;
  measurement.set_idempotency_key("k");
  measurement.set_device_id("edge-42");
  measurement.set_path("w4a8-amx");
  measurement.set_decode_tok_s(80);
  measurement.set_threads(24);
  EXPECT_THAT(ValidateReport(measurement), IsOk());
  v1::ReportOutcomeRequest outcome;
  outcome.set_idempotency_key("k");
  outcome.set_device_id("edge-42");
  outcome.set_outcome(v1::OUTCOME_ENGINE_STARTED);
  EXPECT_THAT(ValidateReport(outcome), IsOk());
  // The store's own check takes any 1..256 bytes; a resolve takes none of these.
  for (const std::string& bad : {std::string("edge\n42"), std::string("edge 42"),
                                std::string("edge\x1b[2J"), std::string("edge\0", 5)}) {
    measurement.set_device_id(bad);
    outcome.set_device_id(bad);
    EXPECT_THAT(ValidateReport(measurement),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device_id has a character")));
    EXPECT_THAT(ValidateReport(outcome),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device_id has a character")));
  }
  measurement.set_device_id("edge-42");
  measurement.set_engine_version(std::string(257, 'e'));
  EXPECT_THAT(ValidateReport(measurement),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("engine_version is 257 bytes")));
}

}  // namespace
}  // namespace weightpath::server
