// Failure gates judged by anytime-valid sequential tests: members against
// control devices of their own hardware class, with a known false-pause
// rate however often the rollout is evaluated. The method and its
// references are in README.md, "Sequential gates".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "deploy/cohort_outcomes.h"
#include "policy/hardware_class.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::deploy {

// One gate's evidence on one side pair: failures among trials (concluded
// devices, or tasks) for the members and for the control devices.
struct FailureCounts {
  uint64_t member_failures = 0;
  uint64_t member_trials = 0;
  uint64_t control_failures = 0;
  uint64_t control_trials = 0;
};

// v1::SequentialGates with the defaults filled in, and the level each
// stage's tests run at.
struct SequentialGateSettings {
  double false_pause_rate = 0.01;      // for the whole rollout
  double stage_false_pause_rate = 0.01;  // false_pause_rate split over the stages
  double min_relative_increase = 1.5;
  double min_absolute_increase = 0.01;
  uint64_t min_member_trials = 1;
  uint64_t min_control_trials = 1;
  // The lifecycle gates' fail test: the conditional e-process at 0.3 of the
  // stage's rate plus Fisher's exact test at the horizon at 0.7
  // (kHorizonShareOfFalsePauseRate; true, the default), or universal
  // inference at the whole rate.
  bool conditional = true;
};

// The rollout's settings. Only stages under 100% have control devices to
// test against, so the false-pause rate is split evenly over those (a union
// bound: the stages' control groups differ, so their evidence does not
// chain into one test).
SequentialGateSettings SequentialSettingsFor(const v1::Rollout& rollout);

// The two e-processes of one stratum, on precomputed tables so that a gate
// can be judged after every report. Both are functions of the counts alone,
// so evaluating them from the stored counts at any moment is evaluating the
// process at that moment; README.md derives both.
class SequentialGateTest {
 public:
  explicit SequentialGateTest(const SequentialGateSettings& settings);

  const SequentialGateSettings& settings() const { return settings_; }

  // Natural log of the e-value against "members fail no more often than
  // control" (rate ratio <= 1). Large: members are worse.
  double LogFailEValue(const FailureCounts& counts) const;

  // Natural log of the e-value against "members fail at least
  // min_relative_increase times as often as control, and by at least
  // min_absolute_increase". Large: any increase is smaller than that.
  double LogPassEValue(const FailureCounts& counts) const;

  // ln(1 / stage_false_pause_rate): either e-value at or above it rejects.
  double LogThreshold() const { return log_threshold_; }

 private:
  SequentialGateSettings settings_;
  double log_threshold_ = 0;
  // Base rates the mixtures range over, with ln r and ln(1 - r).
  std::vector<double> base_rates_;
  std::vector<double> log_rates_;
  std::vector<double> log_complements_;
  // Member rates under each alternative curve, by curve then base rate.
  std::vector<std::vector<double>> curve_log_rates_;
  std::vector<std::vector<double>> curve_log_complements_;
  std::vector<double> log_base_prior_weights_;  // by base rate
  double log_curve_prior_weight_ = 0;           // of one alternative curve
};

enum class GateVerdict { kPass, kFail, kInconclusive };

absl::string_view GateVerdictName(GateVerdict verdict);  // "pass", "fail", "inconclusive"

struct StratumReading {
  policy::HardwareClass hardware_class = policy::HardwareClass::kX86Cpu;
  FailureCounts counts;
  double log_fail_e_value = 0;
  double log_pass_e_value = 0;
};

struct SequentialGateReading {
  std::string gate;  // "boot", "artifact", "engine", "silent" or "task"
  GateVerdict verdict = GateVerdict::kInconclusive;
  // Fail: the mean of the strata's e-values, so that one regressed class is
  // not cancelled by healthy ones. Pass: the smallest, since every class
  // has to pass.
  double log_fail_e_value = 0;
  double log_pass_e_value = 0;
  double log_threshold = 0;       // pass: ln(1 / the stage's false-pause rate)
  double log_fail_threshold = 0;  // fail: the same, or ln(1/0.3) more for the conditional test
  // The conditional test's other half, read at the horizon: Fisher's exact
  // one-sided p-value, the smallest over the classes times their number
  // (Bonferroni), against horizon_alpha; horizon_alpha 0 for a gate that
  // has none (universal inference, the task gate).
  double horizon_p_value = 1;
  double horizon_alpha = 0;
  FailureCounts totals;  // summed over the strata
  std::vector<StratumReading> strata;
  std::string why_inconclusive;  // empty unless inconclusive
};

// Judges one gate from its strata (one per hardware class that has both
// member and control devices). Fail needs the summed minimum counts, pass
// needs them in every stratum; no strata at all is inconclusive.
// With `fail_values_given`, each stratum's log_fail_e_value is taken as it
// comes (the conditional test's, computed from the reports in order) and
// log_fail_threshold is the stage's threshold over the e-process's share.
SequentialGateReading JudgeGate(absl::string_view gate, const SequentialGateTest& test,
                                std::vector<StratumReading> strata,
                                bool fail_values_given = false);

// Every failure gate of the rollout, stratified by hardware class.
// Classes with members but no control device make each gate inconclusive
// (nothing to compare them with); classes with control devices only are
// left out. Empty when the rollout has no `gates.sequential`, or when no
// class has a control device (a 100% stage: README.md says how it is
// judged then).
// With the conditional fail test, the boot, artifact, engine and silent
// gates read each class's reports in the order they were observed (a
// silent member at its deadline) and carry the horizon test's p-value.
std::vector<SequentialGateReading> JudgeSequentialGates(const v1::Rollout& rollout,
                                                        const std::vector<CohortDevice>& members,
                                                        const std::vector<CohortDevice>& control,
                                                        absl::Time now,
                                                        absl::Duration reach_timeout = kDefaultReachTimeout);

// "engine gate: fail, e-value 412 >= 100 (members 12/300 failed, control 20/2700)"
std::string DescribeSequentialGate(const SequentialGateReading& reading);

// The reading as stored on the rollout for ExplainDecision, `rollout status`
// and metrics (e-values, not their logs).
v1::SequentialGateStatus SequentialGateStatusOf(const SequentialGateReading& reading);

}  // namespace weightpath::deploy
