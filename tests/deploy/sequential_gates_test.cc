#include "deploy/sequential_gates.h"

#include "deploy/conditional_fail_test.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "deploy/rollout_evaluation.h"
#include "deploy/rollout_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_fixtures.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::deploy {
namespace {

using ::testing::HasSubstr;
using ::weightpath::deploy::testing::Epoch;
using ::weightpath::deploy::testing::FidelityForAgentic;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;
using policy::HardwareClass;

SequentialGateSettings Defaults() { return SequentialGateSettings{}; }

// The mixtures range over 98 base rates r_j (0, then 1e-4 * 1.1^i for
// i = 0..96), weighted 1/4 on 0 and 3/4 spread evenly over the rest; the
// fail test's 7 alternative curves are h_k(r) = min(1, max(rho_k r,
// r + delta_k)), rho_k = 1 + 0.5 * 2^k, delta_k = 0.01 * 2^k, each 1/7.
// The expected figures were computed apart from the library (a short
// Python script of the same definitions, the suprema by a search over
// 200,000 rates).
struct Case {
  FailureCounts counts;
  double log_fail;
  double log_pass;
};

TEST(DeploySequentialGatesTest, NoDataIsAnEValueOfOne) {
  SequentialGateTest test(Defaults());
  // The prior weights sum to 1, up to rounding.
  EXPECT_NEAR(test.LogFailEValue({}), 0.0, 1e-12);
  EXPECT_NEAR(test.LogPassEValue({}), 0.0, 1e-12);
}

TEST(DeploySequentialGatesTest, OneFailedMemberAndNoControl) {
  // With one failed member and nothing else, the null's best likelihood is
  // 1 (member rate 1, control rate free), so the fail e-value is the prior
  // mean of the curves' member rate, sum_k sum_j w_j h_k(r_j) / 7; the pass
  // e-value is the prior mean of r_j over the same 1.
  SequentialGateTest test(Defaults());
  double mean_curve_rate = 0;
  double mean_rate = 0;
  for (int k = 0; k < 7; ++k) {
    for (int j = 0; j < 98; ++j) {
      double rate = j == 0 ? 0.0 : 1e-4 * std::pow(1.1, j - 1);
      double weight = j == 0 ? 0.25 : 0.75 / 97;
      double scale = std::ldexp(1.0, k);
      mean_curve_rate +=
          weight / 7 * std::min(1.0, std::max((1 + 0.5 * scale) * rate, rate + 0.01 * scale));
      if (k == 0) mean_rate += weight * rate;
    }
  }
  FailureCounts counts{1, 1, 0, 0};
  EXPECT_NEAR(test.LogFailEValue(counts), std::log(mean_curve_rate), 1e-12);
  EXPECT_NEAR(test.LogFailEValue(counts), -1.1016120178, 1e-9);
  EXPECT_NEAR(test.LogPassEValue(counts), std::log(mean_rate), 1e-12);
}

TEST(DeploySequentialGatesTest, MatchesIndependentlyComputedEValues) {
  const std::vector<Case> cases = {
      {{0, 1, 1, 1}, -4.5225987562, -1.4127905080},
      {{2, 10, 1, 20}, -1.6743030522, -2.9449958378},
      {{3, 20, 0, 50}, 2.2390139199, -6.0665549576},
      {{0, 200, 4, 800}, -7.0016414695, -0.2490265207},
      {{12, 300, 20, 2700}, 3.9631994885, -12.0429156897},
      {{0, 600, 0, 2000}, -9.0672345563, 4.9372597089},
      {{0, 400, 0, 2000}, -7.0270745168, 2.9423384605},
      {{30, 100, 2, 900}, 62.3640668110, -69.6637263776},
  };
  SequentialGateTest test(Defaults());
  for (const Case& each : cases) {
    SCOPED_TRACE(absl::StrCat(each.counts.member_failures, "/", each.counts.member_trials, " vs ",
                              each.counts.control_failures, "/", each.counts.control_trials));
    EXPECT_NEAR(test.LogFailEValue(each.counts), each.log_fail, 1e-6);
    // The reference's search grid resolves the pass supremum to about 1e-6.
    EXPECT_NEAR(test.LogPassEValue(each.counts), each.log_pass, 1e-5);
  }
}

TEST(DeploySequentialGatesTest, SettingsDefaultAndSplitOverStagesWithControl) {
  v1::Rollout rollout = FidelityForAgentic("fid");
  rollout.clear_stages();
  for (uint32_t percent : {1, 10, 50, 100}) {
    v1::RolloutStage* stage = rollout.add_stages();
    stage->set_percent(percent);
    stage->set_report_timeout_seconds(60);
  }
  rollout.mutable_gates()->mutable_sequential();
  SequentialGateSettings settings = SequentialSettingsFor(rollout);
  EXPECT_DOUBLE_EQ(settings.false_pause_rate, 0.01);
  EXPECT_DOUBLE_EQ(settings.stage_false_pause_rate, 0.01 / 3);
  EXPECT_DOUBLE_EQ(settings.min_relative_increase, 1.5);
  EXPECT_DOUBLE_EQ(settings.min_absolute_increase, 0.01);
  EXPECT_EQ(settings.min_member_trials, 1u);
  EXPECT_EQ(settings.min_control_trials, 1u);
  EXPECT_NEAR(SequentialGateTest(settings).LogThreshold(), std::log(300.0), 1e-12);

  v1::SequentialGates* spec = rollout.mutable_gates()->mutable_sequential();
  spec->set_false_pause_rate(0.05);
  spec->set_min_relative_increase(2);
  spec->set_min_absolute_increase(0.02);
  spec->set_min_member_trials(30);
  spec->set_min_control_trials(100);
  settings = SequentialSettingsFor(rollout);
  EXPECT_DOUBLE_EQ(settings.stage_false_pause_rate, 0.05 / 3);
  EXPECT_DOUBLE_EQ(settings.min_relative_increase, 2);
  EXPECT_DOUBLE_EQ(settings.min_absolute_increase, 0.02);
  EXPECT_EQ(settings.min_member_trials, 30u);
  EXPECT_EQ(settings.min_control_trials, 100u);
}

StratumReading Stratum(HardwareClass hardware_class, FailureCounts counts) {
  StratumReading stratum;
  stratum.hardware_class = hardware_class;
  stratum.counts = counts;
  return stratum;
}

TEST(DeploySequentialGatesTest, VerdictRules) {
  SequentialGateTest test(Defaults());
  SequentialGateReading broken =
      JudgeGate("boot", test, {Stratum(HardwareClass::kX86Cpu, {30, 100, 2, 900})});
  EXPECT_EQ(broken.verdict, GateVerdict::kFail);
  EXPECT_THAT(DescribeSequentialGate(broken),
              HasSubstr("boot gate: fail, e-value 1.21e+27 >= 100 (members 30/100 failed, "
                        "control 2/900)"));

  SequentialGateReading healthy =
      JudgeGate("boot", test, {Stratum(HardwareClass::kX86Cpu, {0, 600, 0, 2000})});
  EXPECT_EQ(healthy.verdict, GateVerdict::kPass);
  EXPECT_NEAR(healthy.log_pass_e_value, 4.9372597089, 1e-5);

  SequentialGateReading early =
      JudgeGate("boot", test, {Stratum(HardwareClass::kX86Cpu, {0, 400, 0, 2000})});
  EXPECT_EQ(early.verdict, GateVerdict::kInconclusive);
  EXPECT_EQ(early.why_inconclusive, "not enough evidence either way yet");

  SequentialGateReading nobody = JudgeGate("boot", test, {});
  EXPECT_EQ(nobody.verdict, GateVerdict::kInconclusive);
  EXPECT_EQ(nobody.why_inconclusive, "no class has both member and control devices");
}

TEST(DeploySequentialGatesTest, MinimumCountsHoldBothVerdicts) {
  SequentialGateSettings settings = Defaults();
  settings.min_member_trials = 700;
  settings.min_control_trials = 1000;
  SequentialGateTest test(settings);
  SequentialGateReading healthy =
      JudgeGate("boot", test, {Stratum(HardwareClass::kX86Cpu, {0, 600, 0, 2000})});
  EXPECT_EQ(healthy.verdict, GateVerdict::kInconclusive);
  EXPECT_EQ(healthy.why_inconclusive,
            "needs 700 member and 1000 control trials per class (x86_cpu 600/2000)");
  SequentialGateReading broken =
      JudgeGate("boot", test, {Stratum(HardwareClass::kX86Cpu, {30, 100, 2, 900})});
  EXPECT_EQ(broken.verdict, GateVerdict::kInconclusive);
}

TEST(DeploySequentialGatesTest, StrataFailOnOneRegressedClassAndPassOnlyWhenEveryClassPasses) {
  SequentialGateTest test(Defaults());
  // A regression on ARM alone is not cancelled by three healthy classes: the
  // fail e-value is the strata's mean, so it loses at most ln 4.
  SequentialGateReading arm_broken = JudgeGate(
      "engine", test,
      {Stratum(HardwareClass::kX86Cpu, {0, 600, 0, 2000}),
       Stratum(HardwareClass::kArm64Cpu, {30, 100, 2, 900}),
       Stratum(HardwareClass::kJetson, {0, 600, 0, 2000}),
       Stratum(HardwareClass::kCudaDiscrete, {0, 600, 0, 2000})});
  EXPECT_EQ(arm_broken.verdict, GateVerdict::kFail);
  EXPECT_GT(arm_broken.log_fail_e_value, 62.36 - std::log(4.0) - 1e-3);

  // Pass is the weakest class's: x86 has passed, jetson has not yet.
  SequentialGateReading jetson_short =
      JudgeGate("engine", test,
                {Stratum(HardwareClass::kX86Cpu, {0, 600, 0, 2000}),
                 Stratum(HardwareClass::kJetson, {0, 400, 0, 2000})});
  EXPECT_EQ(jetson_short.verdict, GateVerdict::kInconclusive);
  EXPECT_NEAR(jetson_short.log_pass_e_value, 2.9423384605, 1e-5);
  EXPECT_EQ(jetson_short.totals.member_trials, 1000u);
  EXPECT_EQ(jetson_short.totals.control_trials, 4000u);
}

TEST(DeploySequentialGatesTest, StrataKeepAClassMixFromLookingLikeARegression) {
  // Jetsons fail 10% of boots on any build, x86 servers 1%. The members
  // happen to be mostly jetsons and the control mostly x86: pooled, members
  // fail 8.2% against 1.9%, yet within each class they match the control.
  SequentialGateTest test(Defaults());
  SequentialGateReading stratified =
      JudgeGate("boot", test,
                {Stratum(HardwareClass::kJetson, {80, 800, 10, 100}),
                 Stratum(HardwareClass::kX86Cpu, {2, 200, 90, 9000})});
  EXPECT_NE(stratified.verdict, GateVerdict::kFail);
  SequentialGateReading pooled =
      JudgeGate("boot", test, {Stratum(HardwareClass::kX86Cpu, {82, 1000, 100, 9100})});
  EXPECT_EQ(pooled.verdict, GateVerdict::kFail);
}

// Equal rates, judged after every single report: the share of streams that
// ever fail stays under alpha. A small version of bench/deploy_gates_bench.
TEST(DeploySequentialGatesTest, EqualRatesJudgedAfterEveryReportRarelyFail) {
  SequentialGateSettings settings = Defaults();
  settings.stage_false_pause_rate = 0.05;
  SequentialGateTest test(settings);
  std::mt19937_64 random(20261201);
  std::bernoulli_distribution fails(0.05);
  std::bernoulli_distribution is_member(0.25);
  int paused = 0;
  constexpr int kStreams = 200;
  for (int stream = 0; stream < kStreams; ++stream) {
    FailureCounts counts;
    for (int report = 0; report < 400; ++report) {
      bool member = is_member(random);
      bool failed = fails(random);
      (member ? counts.member_trials : counts.control_trials) += 1;
      if (failed) (member ? counts.member_failures : counts.control_failures) += 1;
      if (test.LogFailEValue(counts) >= test.LogThreshold()) {
        ++paused;
        break;
      }
    }
  }
  // Expected at most 10 of 200; Ville's inequality bounds the mean, and
  // the slack covers the binomial spread of 200 streams.
  EXPECT_LE(paused, 20);
}

v1::Rollout SequentialRollout(uint32_t first_percent) {
  v1::Rollout spec = FidelityForAgentic("fid");
  spec.clear_stages();
  for (uint32_t percent : {first_percent, 100u}) {
    v1::RolloutStage* stage = spec.add_stages();
    stage->set_percent(percent);
    stage->set_report_timeout_seconds(1800);
  }
  spec.mutable_gates()->set_max_boot_failure_delta(1);
  spec.mutable_gates()->set_max_engine_failure_delta(1);
  spec.mutable_gates()->set_max_task_failure_delta(1);
  spec.mutable_gates()->mutable_sequential();
  absl::StatusOr<v1::Rollout> rollout = StartRollout(spec, *policy::DefaultPolicy(), Epoch());
  EXPECT_THAT(rollout, IsOk());
  return *rollout;
}

std::vector<CohortDevice> Devices(const std::string& prefix, int count, v1::Outcome outcome,
                                  HardwareClass hardware_class = HardwareClass::kX86Cpu) {
  std::vector<CohortDevice> devices;
  for (int i = 0; i < count; ++i) {
    CohortDevice device{absl::StrCat(prefix, i), {}, hardware_class};
    device.outcomes.lifecycle = outcome;
    // Reported once the stage had opened: control evidence counts from then.
    device.outcomes.lifecycle_at = Epoch() + absl::Seconds(1);
    devices.push_back(device);
  }
  return devices;
}

void Append(std::vector<CohortDevice> more, std::vector<CohortDevice>* into) {
  into->insert(into->end(), more.begin(), more.end());
}

const absl::Time kLater = Epoch() + absl::Hours(1);

TEST(DeploySequentialGatesTest, EvaluationPausesOnAFailedGateEvenWithinTheHardGuards) {
  v1::Rollout rollout = SequentialRollout(10);
  std::vector<CohortDevice> members = Devices("m", 70, v1::OUTCOME_ENGINE_STARTED);
  Append(Devices("mf", 30, v1::OUTCOME_BOOT_FAILED), &members);
  std::vector<CohortDevice> control = Devices("c", 898, v1::OUTCOME_ENGINE_STARTED);
  Append(Devices("cf", 2, v1::OUTCOME_BOOT_FAILED), &control);
  RolloutVerdict verdict = EvaluateRollout(rollout, members, control, Epoch() + absl::Minutes(1));
  EXPECT_EQ(verdict.step, RolloutStep::kPause);
  EXPECT_THAT(verdict.reason, HasSubstr("stage 1 of 2: boot gate: fail, e-value"));
  ASSERT_EQ(verdict.sequential_gates.size(), 5u);
  EXPECT_EQ(verdict.sequential_gates[0].gate, "boot");
}

// advance: on_pass, the rule before horizons: only a pass advances.
TEST(DeploySequentialGatesTest, EvaluationHoldsOnInconclusiveAndAdvancesOnPass) {
  v1::Rollout rollout = SequentialRollout(20);
  rollout.mutable_gates()->set_advance("on_pass");
  std::vector<CohortDevice> members = Devices("m", 400, v1::OUTCOME_ENGINE_STARTED);
  std::vector<CohortDevice> control = Devices("c", 2000, v1::OUTCOME_ENGINE_STARTED);
  RolloutVerdict verdict = EvaluateRollout(rollout, members, control, kLater);
  EXPECT_EQ(verdict.step, RolloutStep::kHold);
  EXPECT_THAT(verdict.reason, HasSubstr("boot gate: inconclusive"));
  // No device reports tasks: that gate has nothing to judge and passes.
  EXPECT_EQ(verdict.sequential_gates[4].gate, "task");
  EXPECT_EQ(verdict.sequential_gates[4].verdict, GateVerdict::kPass);

  Append(Devices("more", 200, v1::OUTCOME_ENGINE_STARTED), &members);
  verdict = EvaluateRollout(rollout, members, control, kLater);
  EXPECT_EQ(verdict.step, RolloutStep::kAdvance) << verdict.reason;
}

TEST(DeploySequentialGatesTest, TheVerdictIsStoredOnTheRolloutPerGateAndClass) {
  v1::Rollout rollout = SequentialRollout(10);
  rollout.mutable_gates()->mutable_sequential()->set_fail_test("universal");
  std::vector<CohortDevice> members = Devices("m", 70, v1::OUTCOME_ENGINE_STARTED);
  Append(Devices("mf", 30, v1::OUTCOME_BOOT_FAILED), &members);
  std::vector<CohortDevice> control = Devices("c", 898, v1::OUTCOME_ENGINE_STARTED);
  Append(Devices("cf", 2, v1::OUTCOME_BOOT_FAILED), &control);
  RolloutVerdict verdict = EvaluateRollout(rollout, members, control, Epoch() + absl::Minutes(1));
  v1::Rollout next = ApplyVerdict(rollout, verdict, Epoch() + absl::Minutes(1));
  ASSERT_EQ(next.sequential_gates_size(), 5);
  const v1::SequentialGateStatus& boot = next.sequential_gates(0);
  EXPECT_EQ(boot.gate(), "boot");
  EXPECT_EQ(boot.verdict(), "fail");
  EXPECT_NEAR(std::log(boot.fail_e_value()), 62.3640668110, 1e-6);
  EXPECT_DOUBLE_EQ(boot.threshold(), 100);
  ASSERT_EQ(boot.classes_size(), 1);
  EXPECT_EQ(boot.classes(0).hardware_class(), "x86_cpu");
  EXPECT_EQ(boot.classes(0).member_failures(), 30u);
  EXPECT_EQ(boot.classes(0).member_trials(), 100u);
  EXPECT_EQ(boot.classes(0).control_failures(), 2u);
  EXPECT_EQ(boot.classes(0).control_trials(), 900u);
  EXPECT_EQ(next.sequential_gates(1).verdict(), "inconclusive");
  EXPECT_EQ(next.sequential_gates(1).inconclusive_reason(), "not enough evidence either way yet");
}

TEST(DeploySequentialGatesTest, MembersOfAClassWithoutControlHoldTheStage) {
  v1::Rollout rollout = SequentialRollout(20);
  rollout.mutable_gates()->set_advance("on_pass");
  std::vector<CohortDevice> members = Devices("m", 600, v1::OUTCOME_ENGINE_STARTED);
  Append(Devices("j", 3, v1::OUTCOME_ENGINE_STARTED, HardwareClass::kJetson), &members);
  std::vector<CohortDevice> control = Devices("c", 2000, v1::OUTCOME_ENGINE_STARTED);
  RolloutVerdict verdict = EvaluateRollout(rollout, members, control, kLater);
  EXPECT_EQ(verdict.step, RolloutStep::kHold);
  EXPECT_THAT(verdict.reason, HasSubstr("no control devices of class jetson to compare with"));
}

// The conditional test's pieces against sums done by hand.
TEST(DeployConditionalFailTest, ABlockLikelihoodRatioIsPsiToTheXOverItsNullMean) {
  // One member, one control device, one failure, the member's: under the
  // null the failure is either's with probability 1/2, so
  // LR(psi) = psi / ((1 + psi) / 2).
  std::vector<double> logs = LogBlockLikelihoodRatios({2.0, 3.0}, 1, 1, 1, 1);
  EXPECT_NEAR(logs[0], std::log(4.0 / 3.0), 1e-12);
  EXPECT_NEAR(logs[1], std::log(6.0 / 4.0), 1e-12);
  // Two members, three control, two failures: P0(X = 0, 1, 2) = 3/10, 6/10,
  // 1/10, so E0[2^X] = 0.3 + 1.2 + 0.4 = 1.9.
  EXPECT_NEAR(LogBlockLikelihoodRatios({2.0}, 2, 3, 2, 2)[0], std::log(4 / 1.9), 1e-12);
  EXPECT_NEAR(LogBlockLikelihoodRatios({2.0}, 2, 3, 2, 0)[0], std::log(1 / 1.9), 1e-12);
  // Its mean under the null is exactly 1 (a test martingale's step).
  for (double psi : {1.5, 2.0, 9.0}) {
    const double p[] = {0.3, 0.6, 0.1};
    double mean = 0;
    for (uint64_t y = 0; y <= 2; ++y) {
      mean += p[y] * std::exp(LogBlockLikelihoodRatios({psi}, 2, 3, 2, y)[0]);
    }
    EXPECT_NEAR(mean, 1.0, 1e-12) << psi;
  }
  // Failures that could only be one side's say nothing.
  EXPECT_EQ(LogBlockLikelihoodRatios({2.0}, 3, 0, 2, 2)[0], 0.0);
  EXPECT_EQ(LogBlockLikelihoodRatios({2.0}, 3, 4, 0, 0)[0], 0.0);
}

TEST(DeployConditionalFailTest, FishersTailIsTheHypergeometricUpperTail) {
  EXPECT_NEAR(FisherUpperTail(2, 3, 2, 2), 0.1, 1e-12);
  EXPECT_NEAR(FisherUpperTail(2, 3, 2, 1), 0.7, 1e-12);
  EXPECT_EQ(FisherUpperTail(2, 3, 2, 0), 1.0);
  // 5 of 10 members and 0 of 10 control failed: C(10,5) / C(20,5).
  EXPECT_NEAR(FisherUpperTail(10, 10, 5, 5), 252.0 / 15504.0, 1e-12);
}

TEST(DeployConditionalFailTest, TheMixtureAveragesTheOddsRatiosOverClosedBlocksOnly) {
  ConditionalEProcess process(1.5, /*block_side=*/1);
  EXPECT_EQ(ConditionalOddsRatios(1.5),
            (std::vector<double>{1.5, 2, 3, 5, 9, 17, 33}));
  process.Add(/*member=*/true, /*failed=*/true);
  EXPECT_EQ(process.LogEValue(), 0.0) << "the block is still open";
  process.Add(/*member=*/false, /*failed=*/false);
  double mean = 0;
  for (double psi : ConditionalOddsRatios(1.5)) mean += 2 * psi / (1 + psi) / 7;
  EXPECT_NEAR(process.LogEValue(), std::log(mean), 1e-12);
}

TEST(DeployConditionalFailTest, PlannedPowerShrinksWithTheStage) {
  const double thousand = DetectableRatio(1000, 4000, 0.02, 0.005);
  EXPECT_GT(thousand, 1.7);
  EXPECT_LT(thousand, 2.3);
  EXPECT_LT(DetectableRatio(10000, 40000, 0.02, 0.005), 1.3);
  EXPECT_GT(DetectableRatio(200, 800, 0.02, 0.005), thousand);
  // One member failing among ten control devices is p = 1/11.
  EXPECT_EQ(DetectableRatio(1, 10, 0.02, 0.005), 0.0) << "not even a broken build is caught";
  // Three failing of three, none of ten control: p = 1/286, caught.
  EXPECT_GT(DetectableRatio(3, 10, 0.02, 0.005), 0.0);
}

// The default with sequential gates: at its horizon a stage with no failed
// gate advances, without waiting for a positive pass; a 3x regression is
// stopped before it.
TEST(DeploySequentialGatesTest, AHealthyStageAdvancesAtItsHorizonAndARegressionPausesBeforeIt) {
  v1::Rollout rollout = SequentialRollout(20);
  std::vector<CohortDevice> members = Devices("m", 392, v1::OUTCOME_ENGINE_STARTED);
  Append(Devices("mf", 8, v1::OUTCOME_ENGINE_START_FAILED), &members);
  std::vector<CohortDevice> control = Devices("c", 1960, v1::OUTCOME_ENGINE_STARTED);
  Append(Devices("cf", 40, v1::OUTCOME_ENGINE_START_FAILED), &control);
  CohortDevice waiting{"late", {}};
  waiting.first_shaped_resolve = Epoch() + absl::Minutes(50);  // silent at +80 min
  members.push_back(waiting);
  RolloutVerdict held = EvaluateRollout(rollout, members, control, kLater);
  EXPECT_EQ(held.step, RolloutStep::kHold) << held.reason;
  EXPECT_THAT(held.reason, HasSubstr("1 of 401 members it admitted have not concluded yet; horizon at"));
  // Its timeout (SequentialRollout: 3600 s) runs out: silent, so settled.
  RolloutVerdict advanced = EvaluateRollout(rollout, members, control, kLater + absl::Minutes(21));
  EXPECT_EQ(advanced.step, RolloutStep::kAdvance) << advanced.reason;
  EXPECT_THAT(advanced.reason, HasSubstr("reached its horizon with no failed gate"));

  std::vector<CohortDevice> regressed = Devices("m", 376, v1::OUTCOME_ENGINE_STARTED);
  Append(Devices("mf", 24, v1::OUTCOME_ENGINE_START_FAILED), &regressed);  // 6% vs 2%
  RolloutVerdict paused = EvaluateRollout(rollout, regressed, control, kLater);
  EXPECT_EQ(paused.step, RolloutStep::kPause) << paused.reason;
  EXPECT_THAT(paused.reason, HasSubstr("engine gate"));
}

TEST(DeploySequentialGatesTest, AStageWithoutControlIsLeftToTheHardGuards) {
  v1::Rollout rollout = SequentialRollout(20);
  EnterStage(1, Epoch(), &rollout);
  RolloutVerdict verdict =
      EvaluateRollout(rollout, Devices("m", 10, v1::OUTCOME_ENGINE_STARTED), {}, kLater);
  EXPECT_TRUE(verdict.sequential_gates.empty());
  EXPECT_EQ(verdict.step, RolloutStep::kComplete);
}

TEST(DeploySequentialGatesTest, WithoutSequentialGatesNothingChanges) {
  v1::Rollout rollout = SequentialRollout(20);
  rollout.mutable_gates()->clear_sequential();
  RolloutVerdict verdict =
      EvaluateRollout(rollout, Devices("m", 10, v1::OUTCOME_ENGINE_STARTED),
                      Devices("c", 40, v1::OUTCOME_ENGINE_STARTED), kLater);
  EXPECT_TRUE(verdict.sequential_gates.empty());
  EXPECT_EQ(verdict.step, RolloutStep::kAdvance);
}

TEST(DeploySequentialGatesTest, ValidationNamesTheField) {
  struct Bad {
    void (*set)(v1::SequentialGates*);
    std::string message;
  };
  const std::vector<Bad> bad = {
      {[](v1::SequentialGates* s) { s->set_false_pause_rate(-0.01); },
       "rollout.gates.sequential.false_pause_rate: -0.01 is outside (0, 0.5]"},
      {[](v1::SequentialGates* s) { s->set_false_pause_rate(0.6); },
       "rollout.gates.sequential.false_pause_rate: 0.6 is outside (0, 0.5]"},
      {[](v1::SequentialGates* s) { s->set_false_pause_rate(std::nan("")); },
       "rollout.gates.sequential.false_pause_rate: nan is outside"},
      {[](v1::SequentialGates* s) { s->set_min_relative_increase(1); },
       "rollout.gates.sequential.min_relative_increase: 1 is outside (1, 100]"},
      {[](v1::SequentialGates* s) { s->set_min_relative_increase(101); },
       "rollout.gates.sequential.min_relative_increase: 101 is outside (1, 100]"},
      {[](v1::SequentialGates* s) { s->set_min_absolute_increase(1); },
       "rollout.gates.sequential.min_absolute_increase: 1 is outside (0, 1)"},
      {[](v1::SequentialGates* s) { s->set_min_absolute_increase(-0.5); },
       "rollout.gates.sequential.min_absolute_increase: -0.5 is outside (0, 1)"},
  };
  for (const Bad& each : bad) {
    v1::Rollout rollout = FidelityForAgentic("fid");
    each.set(rollout.mutable_gates()->mutable_sequential());
    EXPECT_THAT(ValidateRollout(rollout, *policy::DefaultPolicy()),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(each.message)));
  }
  v1::Rollout good = FidelityForAgentic("fid");
  good.mutable_gates()->mutable_sequential()->set_false_pause_rate(0.5);
  good.mutable_gates()->mutable_sequential()->set_min_relative_increase(100);
  good.mutable_gates()->mutable_sequential()->set_min_absolute_increase(0.5);
  EXPECT_THAT(ValidateRollout(good, *policy::DefaultPolicy()), IsOk());
}

}  // namespace
}  // namespace weightpath::deploy
