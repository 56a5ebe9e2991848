// The verification rules alone: no database, figures from the seed.
#include "store/verification.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/measurement_validation.h"
#include "store/policy_expectations.h"
#include "store/time_convert.h"
#include "tests/store/seed_expectations.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::store::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

StoredMeasurement Report(const std::string& device, const std::string& path, double decode,
                         absl::Time at, uint32_t exact = 1, uint32_t prompts = 12) {
  StoredMeasurement m;
  m.measurement_id = absl::StrCat(device, "-", absl::ToUnixSeconds(at));
  m.device_id = device;
  m.hardware_class = "x86_cpu";
  m.cpu_model = kSeedCpuAsProbed;
  m.path = path;
  m.decode_tok_s = decode;
  m.prefill_tok_s = 1000;
  m.gemm_ms_per_step = 5.91;
  m.step_ms = 11.55;
  m.threads = 24;
  m.fidelity_exact_matches = exact;
  m.fidelity_prompts = prompts;
  m.measured_at = at;
  return m;
}

TEST(StoreVerification, RegressionIsBelowTheFractionOfTheSameCpusExpectation) {
  const auto expected = ExpectedFor(SeedExpectations(), "w4a8-amx", "x86_cpu");
  // 0.8 x 86.6 = 69.28 tok/s.
  RegressionVerdict slow = IsRegression(Report("d", "w4a8-amx", 69.2, kNow), expected, 0.8);
  EXPECT_TRUE(slow.regression);
  EXPECT_THAT(slow.reason, HasSubstr("decode_tok_s 69.2"));
  EXPECT_THAT(slow.reason, HasSubstr("86.6 tok/s expected"));
  EXPECT_THAT(slow.reason, HasSubstr("24 threads"));
  EXPECT_FALSE(IsRegression(Report("d", "w4a8-amx", 69.3, kNow), expected, 0.8).regression);
  EXPECT_TRUE(IsRegression(Report("d", "w4a8-amx", 80.0, kNow), expected, 0.95).regression);
}

TEST(StoreVerification, OtherCpusAndThreadCountsAreNotJudged) {
  const auto expected = ExpectedFor(SeedExpectations(), "w4a8-amx", "x86_cpu");
  StoredMeasurement other_cpu = Report("d", "w4a8-amx", 10, kNow);
  other_cpu.cpu_model = "Intel(R) Xeon(R) Gold 6430";
  EXPECT_FALSE(IsRegression(other_cpu, expected, 0.8).regression);
  StoredMeasurement fewer_threads = Report("d", "w4a8-amx", 30, kNow);
  fewer_threads.threads = 8;
  EXPECT_FALSE(IsRegression(fewer_threads, expected, 0.8).regression);
}

TEST(StoreVerification, AMeasurementWithNoFigureToCompareSaysItWasNotJudged) {
  const auto expected = ExpectedFor(SeedExpectations(), "w4a8-amx", "x86_cpu");
  // Half the 8480C's figure, on an 8480+: no figure for that CPU, so no
  // verdict, and the answer says why instead of a silent "no regression".
  StoredMeasurement other_cpu = Report("d", "w4a8-amx", 43.3, kNow);
  other_cpu.cpu_model = "Intel(R) Xeon(R) Platinum 8480+";
  const RegressionVerdict verdict = IsRegression(other_cpu, expected, 0.8);
  EXPECT_FALSE(verdict.regression);
  EXPECT_FALSE(verdict.judged);
  EXPECT_THAT(verdict.reason, HasSubstr("not judged: no expected figure for CPU "
                                        "Intel(R) Xeon(R) Platinum 8480+ at 24 threads"));
  EXPECT_THAT(verdict.reason, HasSubstr("8480C at 24 threads"));

  StoredMeasurement fewer_threads = Report("d", "w4a8-amx", 30, kNow);
  fewer_threads.threads = 8;
  EXPECT_THAT(IsRegression(fewer_threads, expected, 0.8).reason, HasSubstr("at 8 threads"));

  const RegressionVerdict no_figures = IsRegression(Report("d", "w4a8-amx", 30, kNow), {}, 0.8);
  EXPECT_FALSE(no_figures.judged);
  EXPECT_THAT(no_figures.reason, HasSubstr("no expected decode figure for path w4a8-amx"));

  const RegressionVerdict judged = IsRegression(Report("d", "w4a8-amx", 80, kNow), expected, 0.8);
  EXPECT_TRUE(judged.judged);
  EXPECT_TRUE(judged.reason.empty());
}

TEST(StoreVerification, FidelityCollapsesBelowHalfTheExpectedRate) {
  const auto w4a8 = ExpectedFor(SeedExpectations(), "w4a8-amx", "x86_cpu");  // 1/12 expected
  EXPECT_TRUE(FidelityCollapsed(0, 36, kSeedCpu, w4a8));
  EXPECT_FALSE(FidelityCollapsed(1, 24, kSeedCpu, w4a8));  // exactly half: not below
  EXPECT_TRUE(FidelityCollapsed(1, 25, kSeedCpu, w4a8));
  const auto w4a16 = ExpectedFor(SeedExpectations(), "w4a16-tinygemm", "x86_cpu");  // 2/12
  EXPECT_TRUE(FidelityCollapsed(1, 13, kSeedCpu, w4a16));
  EXPECT_FALSE(FidelityCollapsed(1, 12, kSeedCpu, w4a16));
  // No fidelity expectation (arm64 was never measured): nothing to collapse from.
  EXPECT_FALSE(FidelityCollapsed(0, 12, "Neoverse-N1", ExpectedFor(SeedExpectations(), "w4a16-tinygemm", "arm64_cpu")));
  EXPECT_FALSE(FidelityCollapsed(0, 0, kSeedCpu, w4a8));
}

TEST(StoreVerification, PolicyFlagVerifiesWhateverTheFleetSays) {
  const std::vector<StoredMeasurement> reports = {Report("a", "w4a8-amx", 50, kNow)};
  auto cells = BuildVerificationMatrix(reports, SeedExpectations(true), VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_TRUE(cells[0].verified());
  EXPECT_EQ(cells[0].verification().source(), v1::Verification::SOURCE_POLICY);
  EXPECT_EQ(cells[0].regressions(), 1u);
}

TEST(StoreVerification, APolicyVerifiedCellShowsTheDevicesThatRegressedBesideIt) {
  const std::vector<StoredMeasurement> reports = {
      Report("a", "w4a8-amx", 86.6, kNow - absl::Hours(2)),
      Report("b", "w4a8-amx", 90.0, kNow - absl::Hours(2)),
      Report("b", "w4a8-amx", 40.0, kNow - absl::Hours(1)),  // b's latest regressed
  };
  auto cells = BuildVerificationMatrix(reports, SeedExpectations(true), VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_TRUE(cells[0].verified());
  EXPECT_EQ(cells[0].device_count(), 2u);
  EXPECT_EQ(cells[0].verification().source(), v1::Verification::SOURCE_POLICY);
  EXPECT_EQ(cells[0].verification().device_count(), 1u);  // inside expectations
  EXPECT_EQ(cells[0].verification().reason(),
            "the policy marks w4a8-amx as measured on x86_cpu; 1 of 2 devices regressed");
}

TEST(StoreVerification, PolicyVerifiedPathsNoDeviceReportedGetTheirOwnCells) {
  const std::vector<PathExpectation> expectations = SeedExpectations(true);
  std::vector<v1::VerificationCell> cells = BuildVerificationMatrix(
      {Report("a", "w4a8-amx", 86.6, kNow - absl::Hours(1))}, expectations, VerificationConfig{},
      kNow);
  AddPolicyVerifiedCells(expectations, &cells);
  // w4a8-amx keeps its fleet cell (the probed CPU name is the policy's model);
  // w4a16-tinygemm on x86 gets one; arm64's unverified path gets none.
  ASSERT_THAT(cells, SizeIs(2));
  EXPECT_EQ(cells[0].path(), "w4a16-tinygemm");
  EXPECT_EQ(cells[0].hardware_class(), "x86_cpu");
  EXPECT_EQ(cells[0].cpu_model(), kSeedCpu);
  EXPECT_EQ(cells[0].device_count(), 0u);
  EXPECT_TRUE(cells[0].verified());
  EXPECT_EQ(cells[0].verification().source(), v1::Verification::SOURCE_POLICY);
  EXPECT_EQ(cells[0].verification().device_count(), 0u);
  EXPECT_THAT(cells[0].verification().reason(), HasSubstr("; no fleet reports"));
  EXPECT_EQ(cells[1].path(), "w4a8-amx");
  EXPECT_EQ(cells[1].device_count(), 1u);

  // Without any verified path nothing is added.
  std::vector<v1::VerificationCell> none;
  AddPolicyVerifiedCells(SeedExpectations(false), &none);
  EXPECT_THAT(none, SizeIs(0));
}

// The issue as operators met it: the policy's figures name the 8480C, the
// devices report "Intel(R) Xeon(R) Platinum 8480+". Without an alias both
// devices are "not judged", counted apart from those inside expectations;
// with the alias they are judged by the 8480C's figure, and the policy's
// own 8480C cell is not listed a second time beside theirs.
TEST(StoreVerification, NotJudgedDevicesAreCountedApartAndAnAliasJudgesThem) {
  std::vector<StoredMeasurement> reports;
  for (const char* device : {"a", "b"}) {
    StoredMeasurement m = Report(device, "w4a8-amx", device == std::string("a") ? 40.0 : 85.0,
                                 kNow - absl::Hours(1));
    m.cpu_model = "Intel(R) Xeon(R) Platinum 8480+";
    reports.push_back(m);
  }
  std::vector<PathExpectation> expectations = SeedExpectations(true);
  std::vector<v1::VerificationCell> cells =
      BuildVerificationMatrix(reports, expectations, VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_EQ(cells[0].not_judged(), 2u);
  EXPECT_EQ(cells[0].regressions(), 0u);
  EXPECT_EQ(cells[0].verification().reason(),
            "the policy marks w4a8-amx as measured on x86_cpu; 0 of 2 devices regressed, 2 not "
            "judged");
  AddPolicyVerifiedCells(expectations, &cells);
  EXPECT_THAT(cells, SizeIs(3));  // the 8480+ cell, and the policy's 8480C cells of both paths

  for (PathExpectation& expectation : expectations) {
    for (policy::ExpectedFigures& figures : expectation.expected) {
      figures.cpu_model_aliases = {"Intel Xeon Platinum 8480+"};
    }
  }
  cells = BuildVerificationMatrix(reports, expectations, VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_EQ(cells[0].not_judged(), 0u);
  EXPECT_EQ(cells[0].regressions(), 1u);  // a's 40 tok/s against 0.8 x 86.6
  EXPECT_EQ(cells[0].verification().reason(),
            "the policy marks w4a8-amx as measured on x86_cpu; 1 of 2 devices regressed");
  AddPolicyVerifiedCells(expectations, &cells);
  ASSERT_THAT(cells, SizeIs(2));  // w4a8-amx's 8480C figure is the 8480+ cell
  EXPECT_EQ(cells[0].path(), "w4a16-tinygemm");
  EXPECT_EQ(cells[1].cpu_model(), "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_THAT(IsRegression(reports[0], ExpectedFor(expectations, "w4a8-amx", "x86_cpu"), 0.8).reason,
              HasSubstr("86.6 tok/s expected"));

  // A fleet-verified cell says it too.
  const std::vector<PathExpectation> unverified = SeedExpectations(false);
  cells = BuildVerificationMatrix(reports, unverified, VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_THAT(cells[0].verification().reason(), HasSubstr("(0 regressed, 2 not judged)"));
}

TEST(StoreVerification, ThreeHealthyDevicesVerifyAPathTheFleetMeasured) {
  const auto expectations = SeedExpectations(/*x86_policy_verified=*/false);
  std::vector<StoredMeasurement> reports = {
      Report("a", "w4a8-amx", 86.6, kNow - absl::Hours(3)),
      Report("b", "w4a8-amx", 84.5, kNow - absl::Hours(2)),
      Report("b", "w4a8-amx", 85.5, kNow - absl::Hours(1)),
  };
  auto cells = BuildVerificationMatrix(reports, expectations, VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_FALSE(cells[0].verified());
  EXPECT_THAT(cells[0].verification().reason(), HasSubstr("measured, not verified: 2 of 3"));

  reports.push_back(Report("c", "w4a8-amx", 90.0, kNow));
  cells = BuildVerificationMatrix(reports, expectations, VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  const v1::VerificationCell& cell = cells[0];
  EXPECT_TRUE(cell.verified());
  EXPECT_EQ(cell.verification().source(), v1::Verification::SOURCE_FLEET);
  EXPECT_EQ(cell.verification().device_count(), 3u);
  EXPECT_THAT(cell.verification().reason(), HasSubstr("3 x86_cpu devices"));
  EXPECT_EQ(cell.device_count(), 3u);
  EXPECT_EQ(cell.cpu_model(), kSeedCpuAsProbed);
  EXPECT_DOUBLE_EQ(cell.decode_tok_s().median(), (85.5 + 86.6) / 2);
  EXPECT_EQ(cell.decode_tok_s().min(), 84.5);
  EXPECT_EQ(cell.decode_tok_s().max(), 90.0);
  EXPECT_EQ(cell.decode_tok_s().samples(), 4u);
  EXPECT_EQ(cell.fidelity_exact_matches(), 4u);
  EXPECT_EQ(cell.fidelity_prompts(), 48u);
  EXPECT_EQ(FromProtoTime(cell.last_measured()), kNow);
}

TEST(StoreVerification, ADeviceWhoseLatestReportRegressesDoesNotCount) {
  const auto expectations = SeedExpectations(false);
  const std::vector<StoredMeasurement> reports = {
      Report("a", "w4a8-amx", 86.0, kNow - absl::Hours(2)),
      Report("b", "w4a8-amx", 86.0, kNow - absl::Hours(2)),
      Report("c", "w4a8-amx", 86.0, kNow - absl::Hours(2)),
      Report("c", "w4a8-amx", 40.0, kNow - absl::Hours(1)),  // c regressed since
  };
  auto cells = BuildVerificationMatrix(reports, expectations, VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_FALSE(cells[0].verified());
  EXPECT_EQ(cells[0].regressions(), 1u);
  EXPECT_THAT(cells[0].verification().reason(), HasSubstr("(1 regressed)"));
}

TEST(StoreVerification, CollapsedFidelityIsMeasuredNotVerified) {
  const auto expectations = SeedExpectations(false);
  std::vector<StoredMeasurement> reports;
  for (const char* device : {"a", "b", "c", "d"}) reports.push_back(Report(device, "w4a8-amx", 86, kNow, 0, 12));
  auto cells = BuildVerificationMatrix(reports, expectations, VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_FALSE(cells[0].verified());
  EXPECT_THAT(cells[0].verification().reason(), HasSubstr("fidelity collapsed (0/48"));
}

TEST(StoreVerification, WindowAndMinDevicesAreConfigurable) {
  const auto expectations = SeedExpectations(false);
  const std::vector<StoredMeasurement> reports = {
      Report("a", "w4a8-amx", 86.0, kNow - absl::Hours(30)),
      Report("b", "w4a8-amx", 86.0, kNow - absl::Hours(1)),
  };
  VerificationConfig config;
  config.min_devices = 1;
  config.window = absl::Hours(24);
  auto cells = BuildVerificationMatrix(reports, expectations, config, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_EQ(cells[0].device_count(), 1u);  // a is outside the day
  EXPECT_TRUE(cells[0].verified());
  EXPECT_THAT(cells[0].verification().reason(), HasSubstr("within 1d"));
}

TEST(StoreVerification, CellsSplitByPathClassAndCpuModelAndSkipUnmeasuredFigures) {
  std::vector<StoredMeasurement> reports = {
      Report("a", "w4a8-amx", 86.0, kNow),
      Report("b", "w4a16-tinygemm", 80.0, kNow),
      Report("c", "w4a16-tinygemm", 79.0, kNow),
  };
  reports[2].cpu_model = "Intel(R) Xeon(R) Gold 6430";
  reports[2].gemm_ms_per_step = 0;  // not measured by that engine
  auto cells = BuildVerificationMatrix(reports, SeedExpectations(), VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(3));
  EXPECT_EQ(cells[0].path(), "w4a16-tinygemm");
  EXPECT_EQ(cells[0].cpu_model(), "Intel(R) Xeon(R) Gold 6430");
  EXPECT_EQ(cells[0].gemm_ms_per_step().samples(), 0u);
  EXPECT_EQ(cells[1].cpu_model(), kSeedCpuAsProbed);
  EXPECT_EQ(cells[2].path(), "w4a8-amx");
}

TEST(StoreVerification, DeviceVerificationFallsBackToThePolicyFlag) {
  const auto expectations = SeedExpectations();
  const std::vector<v1::VerificationCell> empty;
  DeviceVerification amx = VerificationForDevice(empty, expectations, "w4a8-amx", "x86_cpu", kSeedCpuAsProbed);
  EXPECT_TRUE(amx.verified);
  EXPECT_EQ(amx.verification.source(), v1::Verification::SOURCE_POLICY);
  DeviceVerification arm = VerificationForDevice(empty, expectations, "w4a16-tinygemm", "arm64_cpu", "Neoverse-N1");
  EXPECT_FALSE(arm.verified);
  EXPECT_EQ(arm.verification.source(), v1::Verification::SOURCE_NONE);
  EXPECT_THAT(arm.verification.reason(), HasSubstr("no fleet reports"));

  StoredMeasurement on_arm = Report("a", "w4a16-tinygemm", 20, kNow);
  on_arm.hardware_class = "arm64_cpu";
  on_arm.cpu_model = "Neoverse-N1";
  auto cells = BuildVerificationMatrix({on_arm}, expectations, VerificationConfig{}, kNow);
  DeviceVerification measured = VerificationForDevice(cells, expectations, "w4a16-tinygemm", "arm64_cpu", "Neoverse-N1");
  EXPECT_FALSE(measured.verified);  // one device of the three needed
  EXPECT_EQ(measured.verification.source(), v1::Verification::SOURCE_FLEET);
  EXPECT_EQ(measured.verification.device_count(), 1u);
}

TEST(StoreVerification, DefaultPolicyCarriesTheSeedsExpectationsPerClass) {
  const std::vector<PathExpectation> expectations = ExpectationsFromPolicy(*policy::DefaultPolicy());
  EXPECT_TRUE(PolicyVerified(expectations, "w4a8-amx", "x86_cpu"));
  EXPECT_TRUE(PolicyVerified(expectations, "w4a16-tinygemm", "x86_cpu"));
  EXPECT_FALSE(PolicyVerified(expectations, "w4a16-tinygemm", "arm64_cpu"));
  EXPECT_FALSE(PolicyVerified(expectations, "w4a8-amx", "arm64_cpu"));

  // The regression floor comes from the policy's 86.6 tok/s at 24 threads.
  const auto amx = ExpectedFor(expectations, "w4a8-amx", "x86_cpu");
  EXPECT_TRUE(IsRegression(Report("d", "w4a8-amx", 69.2, kNow), amx, 0.8).regression);
  EXPECT_FALSE(IsRegression(Report("d", "w4a8-amx", 69.3, kNow), amx, 0.8).regression);
  // Fidelity 1/12 expected: 0 of 36 collapses, 1 of 24 does not.
  EXPECT_TRUE(FidelityCollapsed(0, 36, kSeedCpuAsProbed, amx));
  EXPECT_FALSE(FidelityCollapsed(1, 24, kSeedCpuAsProbed, amx));
  // Devices name the part "Intel(R) Xeon(R) Platinum 8480+": the policy's
  // aliases judge them by the 8480C's figures.
  StoredMeasurement plus = Report("d", "w4a8-amx", 69.2, kNow);
  plus.cpu_model = "Intel(R) Xeon(R) Platinum 8480+";
  const RegressionVerdict plus_verdict = IsRegression(plus, amx, 0.8);
  EXPECT_TRUE(plus_verdict.judged);
  EXPECT_TRUE(plus_verdict.regression);
  // The unverified arm64 build becomes verified by three healthy devices.
  std::vector<StoredMeasurement> reports;
  for (const char* device : {"a", "b", "c"}) {
    StoredMeasurement m = Report(device, "w4a16-tinygemm", 20, kNow);
    m.hardware_class = "arm64_cpu";
    m.cpu_model = "Neoverse-N1";
    reports.push_back(m);
  }
  auto cells = BuildVerificationMatrix(reports, expectations, VerificationConfig{}, kNow);
  ASSERT_THAT(cells, SizeIs(1));
  EXPECT_TRUE(cells[0].verified());
  EXPECT_EQ(cells[0].verification().source(), v1::Verification::SOURCE_FLEET);
}

v1::ReportMeasurementRequest ValidRequest() {
  v1::ReportMeasurementRequest request;
  request.set_idempotency_key("k");
  request.set_device_id("d");
  request.set_path("w4a8-amx");
  request.set_decode_tok_s(86.6);
  request.set_prefill_tok_s(1000);
  request.set_gemm_ms_per_step(5.91);
  request.set_step_ms(11.55);
  request.set_threads(24);
  request.set_fidelity_exact_matches(1);
  request.set_fidelity_prompts(12);
  return request;
}

TEST(StoreValidation, AcceptsTheSeedsFigures) { EXPECT_THAT(ValidateMeasurement(ValidRequest()), IsOk()); }

TEST(StoreValidation, EachBadFieldIsNamed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::function<void(v1::ReportMeasurementRequest&)> spoil;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.clear_idempotency_key(); }, "idempotency_key"},
      {[](auto& r) { r.set_device_id(std::string(257, 'x')); }, "device_id"},
      {[](auto& r) { r.clear_path(); }, "path"},
      {[&](auto& r) { r.set_decode_tok_s(nan); }, "decode_tok_s"},
      {[](auto& r) { r.set_decode_tok_s(0); }, "decode_tok_s"},
      {[&](auto& r) { r.set_prefill_tok_s(inf); }, "prefill_tok_s"},
      {[](auto& r) { r.set_gemm_ms_per_step(-1); }, "gemm_ms_per_step"},
      {[](auto& r) { r.set_step_ms(2e6); }, "step_ms"},
      {[](auto& r) { r.set_threads(0); }, "threads"},
      {[](auto& r) { r.set_fidelity_exact_matches(13); }, "fidelity_exact_matches"},
      {[](auto& r) { r.set_fidelity_prompts(20000); r.set_fidelity_exact_matches(0); }, "fidelity_prompts"},
      {[](auto& r) { r.mutable_measured_at()->set_nanos(-1); }, "measured_at"},
      {[](auto& r) { r.set_model(std::string(257, 'm')); }, "model is 257 bytes"},
      {[](auto& r) { r.set_engine_version(std::string(60000, 'e')); }, "engine_version is 60000 bytes"},
      {[](auto& r) { r.set_path(std::string(257, 'p')); }, "path is 257 bytes"},
  };
  for (const Case& c : cases) {
    v1::ReportMeasurementRequest request = ValidRequest();
    c.spoil(request);
    EXPECT_THAT(ValidateMeasurement(request),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.field)))
        << request.ShortDebugString();
  }
}

TEST(StoreValidation, OutcomeNeedsKeyDeviceAndAKnownOutcome) {
  v1::ReportOutcomeRequest request;
  request.set_idempotency_key("k");
  request.set_device_id("d");
  request.set_outcome(v1::OUTCOME_ENGINE_STARTED);
  EXPECT_THAT(ValidateOutcome(request), IsOk());
  request.set_tasks_failed(2);
  EXPECT_THAT(ValidateOutcome(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("OUTCOME_TASKS")));
  request.set_outcome(v1::OUTCOME_TASKS);
  EXPECT_THAT(ValidateOutcome(request), IsOk());
  request.clear_device_id();
  EXPECT_THAT(ValidateOutcome(request), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device_id")));
}

TEST(StoreValidation, EveryStoredOutcomeStringIsBoundedAndNamed) {
  v1::ReportOutcomeRequest valid;
  valid.set_idempotency_key("k");
  valid.set_device_id("d");
  valid.set_outcome(v1::OUTCOME_ENGINE_START_FAILED);
  valid.set_path(std::string(256, 'p'));
  valid.set_rollout_id(std::string(256, 'r'));
  valid.set_artifact_sha256(std::string(256, 'a'));
  valid.set_policy_version(std::string(256, 'v'));
  valid.set_detail(std::string(1024, 'x'));
  EXPECT_THAT(ValidateOutcome(valid), IsOk());
  struct Case {
    std::function<void(v1::ReportOutcomeRequest&)> spoil;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.set_path(std::string(257, 'p')); }, "path is 257 bytes; at most 256"},
      {[](auto& r) { r.set_rollout_id(std::string(60000, 'r')); }, "rollout_id is 60000 bytes"},
      {[](auto& r) { r.set_artifact_sha256(std::string(257, 'a')); }, "artifact_sha256 is 257"},
      {[](auto& r) { r.set_policy_version(std::string(257, 'v')); }, "policy_version is 257"},
      {[](auto& r) { r.set_detail(std::string(1025, 'x')); }, "detail is 1025 bytes; at most 1024"},
      {[](auto& r) { r.set_idempotency_key(std::string(257, 'k')); }, "idempotency_key is 257"},
  };
  for (const Case& c : cases) {
    v1::ReportOutcomeRequest request = valid;
    c.spoil(request);
    EXPECT_THAT(ValidateOutcome(request),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
}

TEST(StoreValidation, TaskCountsThatWrapIn32BitsStillCountAsTasks) {
  // 4294967295 + 1 is 0 in uint32: it used to pass as "no task counts".
  v1::ReportOutcomeRequest request;
  request.set_idempotency_key("k");
  request.set_device_id("d");
  request.set_outcome(v1::OUTCOME_ENGINE_STARTED);
  request.set_tasks_completed(4294967295u);
  request.set_tasks_undone(1);
  EXPECT_THAT(ValidateOutcome(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("only allowed with outcome OUTCOME_TASKS")));
  request.set_tasks_undone(0);
  request.set_tasks_failed(1);
  request.set_tasks_completed(4294967295u);
  EXPECT_THAT(ValidateOutcome(request), StatusIs(absl::StatusCode::kInvalidArgument));
  request.set_outcome(v1::OUTCOME_TASKS);
  request.set_tasks_undone(4294967295u);
  request.set_tasks_failed(4294967295u);
  EXPECT_THAT(ValidateOutcome(request), IsOk());
}

}  // namespace
}  // namespace weightpath::store::testing
