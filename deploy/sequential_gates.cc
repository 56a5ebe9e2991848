#include "deploy/sequential_gates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/proto_time.h"
#include "deploy/conditional_fail_test.h"
#include "deploy/rollout_bucket.h"

namespace weightpath::deploy {
namespace {

constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();

// The base-rate grid of both mixtures: 0, then 1e-4 up to about 0.94 in
// steps of 10%. A discrete prior makes each e-value an exact finite sum,
// not a quadrature that could overstate it; at 10% steps the nearest grid
// rate costs at most a few hundredths of a nat per hundred failures.
constexpr double kLowestNonZeroRate = 1e-4;
constexpr double kRateStep = 1.1;
constexpr int kNonZeroRates = 97;
// A failure gate of a healthy build often sees no failure at all: a quarter
// of the prior on the rate 0 lets such a gate pass after about half the
// trials a log-uniform prior alone would need, at a cost of 0.3 nats
// elsewhere.
constexpr double kPriorOnZeroRate = 0.25;

// Alternative curves of the fail test: member rate
// max(rho_k * r, r + delta_k), rho_k - 1 and delta_k doubling from the
// smallest increase worth stopping for, so that a 2x regression and a
// broken build both have a curve close to them.
constexpr int kFailCurves = 7;

// count * log_value, with 0 * -inf = 0 (an outcome that never happened
// says nothing about a rate of 0 or 1).
double CountTimesLog(uint64_t count, double log_value) {
  return count == 0 ? 0.0 : static_cast<double>(count) * log_value;
}

double SafeLog(double value) { return value <= 0 ? kNegativeInfinity : std::log(value); }

double LogLikelihood(uint64_t failures, uint64_t trials, double rate) {
  return CountTimesLog(failures, SafeLog(rate)) + CountTimesLog(trials - failures, SafeLog(1 - rate));
}

double LogLikelihood(const FailureCounts& counts, double member_rate, double control_rate) {
  return LogLikelihood(counts.member_failures, counts.member_trials, member_rate) +
         LogLikelihood(counts.control_failures, counts.control_trials, control_rate);
}

double ObservedRate(uint64_t failures, uint64_t trials) {
  return trials == 0 ? 0.0 : static_cast<double>(failures) / static_cast<double>(trials);
}

double LogSumExp(const std::vector<double>& terms) {
  double largest = kNegativeInfinity;
  for (double term : terms) largest = std::max(largest, term);
  if (largest == kNegativeInfinity) return kNegativeInfinity;
  double sum = 0;
  for (double term : terms) sum += std::exp(term - largest);
  return largest + std::log(sum);
}

double CountOver(uint64_t count, double denominator) {
  return count == 0 ? 0.0 : static_cast<double>(count) / denominator;
}

// The largest log-likelihood with the member rate on the line
// slope * r + offset over control rates r in [low, high]. Concave in r, so
// bisection on the sign of its derivative finds the maximum.
double MaxOnLine(const FailureCounts& counts, double slope, double offset, double low,
                 double high) {
  if (low > high) return kNegativeInfinity;
  auto derivative = [&](double r) {
    double member_rate = slope * r + offset;
    return slope * CountOver(counts.member_failures, member_rate) -
           slope * CountOver(counts.member_trials - counts.member_failures, 1 - member_rate) +
           CountOver(counts.control_failures, r) -
           CountOver(counts.control_trials - counts.control_failures, 1 - r);
  };
  double best;
  if (derivative(low) <= 0) {
    best = low;
  } else if (derivative(high) >= 0) {
    best = high;
  } else {
    double a = low;
    double b = high;
    for (int i = 0; i < 200 && b - a > 1e-16; ++i) {
      double middle = 0.5 * (a + b);
      (derivative(middle) > 0 ? a : b) = middle;
    }
    best = 0.5 * (a + b);
  }
  return LogLikelihood(counts, std::min(1.0, slope * best + offset), best);
}

}  // namespace

SequentialGateSettings SequentialSettingsFor(const v1::Rollout& rollout) {
  SequentialGateSettings settings;
  const v1::SequentialGates& spec = rollout.gates().sequential();
  if (spec.false_pause_rate() > 0) settings.false_pause_rate = spec.false_pause_rate();
  if (spec.min_relative_increase() > 0) settings.min_relative_increase = spec.min_relative_increase();
  if (spec.min_absolute_increase() > 0) settings.min_absolute_increase = spec.min_absolute_increase();
  if (spec.min_member_trials() > 0) settings.min_member_trials = spec.min_member_trials();
  if (spec.min_control_trials() > 0) settings.min_control_trials = spec.min_control_trials();
  settings.conditional = spec.fail_test() != "universal";
  int stages_with_control = 0;
  for (const v1::RolloutStage& stage : rollout.stages()) {
    if (stage.percent() < 100) ++stages_with_control;
  }
  settings.stage_false_pause_rate = settings.false_pause_rate / std::max(1, stages_with_control);
  return settings;
}

SequentialGateTest::SequentialGateTest(const SequentialGateSettings& settings)
    : settings_(settings), log_threshold_(-std::log(settings.stage_false_pause_rate)) {
  base_rates_.push_back(0);
  for (int i = 0; i < kNonZeroRates; ++i) {
    base_rates_.push_back(kLowestNonZeroRate * std::pow(kRateStep, i));
  }
  for (double rate : base_rates_) {
    log_rates_.push_back(SafeLog(rate));
    log_complements_.push_back(SafeLog(1 - rate));
  }
  for (int k = 0; k < kFailCurves; ++k) {
    double scale = std::ldexp(1.0, k);
    double ratio = 1 + (settings.min_relative_increase - 1) * scale;
    double increase = settings.min_absolute_increase * scale;
    std::vector<double> log_rates;
    std::vector<double> log_complements;
    for (double rate : base_rates_) {
      double member_rate = std::min(1.0, std::max(ratio * rate, rate + increase));
      log_rates.push_back(SafeLog(member_rate));
      log_complements.push_back(SafeLog(1 - member_rate));
    }
    curve_log_rates_.push_back(std::move(log_rates));
    curve_log_complements_.push_back(std::move(log_complements));
  }
  log_base_prior_weights_.push_back(std::log(kPriorOnZeroRate));
  for (int i = 0; i < kNonZeroRates; ++i) {
    log_base_prior_weights_.push_back(std::log((1 - kPriorOnZeroRate) / kNonZeroRates));
  }
  log_curve_prior_weight_ = -std::log(static_cast<double>(kFailCurves));
}

// Universal inference (Wasserman, Ramdas and Balakrishnan 2020): a Bayes
// mixture of the alternatives over the likelihood maximised over the null.
// For every null rate pair the mixture's ratio to that pair's likelihood is
// a test martingale, and the maximised denominator is at least each pair's
// likelihood, so the ratio is an e-process for the whole null.
double SequentialGateTest::LogFailEValue(const FailureCounts& c) const {
  const uint64_t member_successes = c.member_trials - c.member_failures;
  const uint64_t control_successes = c.control_trials - c.control_failures;
  std::vector<double> terms;
  terms.reserve(curve_log_rates_.size() * base_rates_.size());
  for (size_t k = 0; k < curve_log_rates_.size(); ++k) {
    for (size_t j = 0; j < base_rates_.size(); ++j) {
      terms.push_back(log_curve_prior_weight_ + log_base_prior_weights_[j] +
                      CountTimesLog(c.member_failures, curve_log_rates_[k][j]) +
                      CountTimesLog(member_successes, curve_log_complements_[k][j]) +
                      CountTimesLog(c.control_failures, log_rates_[j]) +
                      CountTimesLog(control_successes, log_complements_[j]));
    }
  }
  const double log_mixture = LogSumExp(terms);

  // The null (member rate <= control rate) at its most likely: the observed
  // rates when they lie in it, else both sides at the pooled rate.
  double member_rate = ObservedRate(c.member_failures, c.member_trials);
  double control_rate = ObservedRate(c.control_failures, c.control_trials);
  if (c.control_trials == 0) control_rate = 1;  // unconstrained by data
  if (c.member_trials > 0 && member_rate > control_rate) {
    member_rate = control_rate = ObservedRate(c.member_failures + c.control_failures,
                                              c.member_trials + c.control_trials);
  }
  return log_mixture - LogLikelihood(c, member_rate, control_rate);
}

// The same construction with the roles turned: the mixture is over equal
// rates, the null is the region worth stopping for,
// member rate >= max(rho * r, r + delta) for control rate r.
double SequentialGateTest::LogPassEValue(const FailureCounts& c) const {
  const uint64_t member_successes = c.member_trials - c.member_failures;
  const uint64_t control_successes = c.control_trials - c.control_failures;
  std::vector<double> terms;
  terms.reserve(base_rates_.size());
  for (size_t j = 0; j < base_rates_.size(); ++j) {
    terms.push_back(log_base_prior_weights_[j] + CountTimesLog(c.member_failures, log_rates_[j]) +
                    CountTimesLog(member_successes, log_complements_[j]) +
                    CountTimesLog(c.control_failures, log_rates_[j]) +
                    CountTimesLog(control_successes, log_complements_[j]));
  }
  const double log_mixture = LogSumExp(terms);

  const double ratio = settings_.min_relative_increase;
  const double increase = settings_.min_absolute_increase;
  const double member_rate = ObservedRate(c.member_failures, c.member_trials);
  const double control_rate = ObservedRate(c.control_failures, c.control_trials);
  double log_null;
  if (c.member_trials > 0 && member_rate < std::max(ratio * control_rate, control_rate + increase)) {
    // The likelihood is concave and the null region convex, so the maximum
    // lies on its boundary: r + delta up to the kink, rho * r beyond it,
    // as far as the member rate stays within 1.
    const double kink = increase / (ratio - 1);
    const double highest = std::min(1 / ratio, 1 - increase);
    log_null = std::max(MaxOnLine(c, 1, increase, 0, std::min(kink, highest)),
                        MaxOnLine(c, ratio, 0, std::min(kink, highest), highest));
  } else {
    log_null = LogLikelihood(c, member_rate, control_rate);
  }
  return log_mixture - log_null;
}

absl::string_view GateVerdictName(GateVerdict verdict) {
  switch (verdict) {
    case GateVerdict::kPass:
      return "pass";
    case GateVerdict::kFail:
      return "fail";
    case GateVerdict::kInconclusive:
      return "inconclusive";
  }
  return "unknown";
}

SequentialGateReading JudgeGate(absl::string_view gate, const SequentialGateTest& test,
                                std::vector<StratumReading> strata, bool fail_values_given) {
  const SequentialGateSettings& settings = test.settings();
  SequentialGateReading reading;
  reading.gate = std::string(gate);
  reading.log_threshold = test.LogThreshold();
  // The conditional test spends only its share of the stage's rate before
  // the horizon.
  reading.log_fail_threshold =
      test.LogThreshold() - (fail_values_given ? std::log(1 - kHorizonShareOfFalsePauseRate) : 0.0);
  reading.strata = std::move(strata);
  if (reading.strata.empty()) {
    reading.why_inconclusive = "no class has both member and control devices";
    return reading;
  }
  std::vector<double> fail_terms;
  reading.log_pass_e_value = std::numeric_limits<double>::infinity();
  bool every_stratum_counted = true;
  for (StratumReading& stratum : reading.strata) {
    if (!fail_values_given) stratum.log_fail_e_value = test.LogFailEValue(stratum.counts);
    stratum.log_pass_e_value = test.LogPassEValue(stratum.counts);
    fail_terms.push_back(stratum.log_fail_e_value);
    reading.log_pass_e_value = std::min(reading.log_pass_e_value, stratum.log_pass_e_value);
    every_stratum_counted &= stratum.counts.member_trials >= settings.min_member_trials &&
                             stratum.counts.control_trials >= settings.min_control_trials;
    reading.totals.member_failures += stratum.counts.member_failures;
    reading.totals.member_trials += stratum.counts.member_trials;
    reading.totals.control_failures += stratum.counts.control_failures;
    reading.totals.control_trials += stratum.counts.control_trials;
  }
  reading.log_fail_e_value =
      LogSumExp(fail_terms) - std::log(static_cast<double>(fail_terms.size()));

  const bool totals_counted = reading.totals.member_trials >= settings.min_member_trials &&
                              reading.totals.control_trials >= settings.min_control_trials;
  if (totals_counted && reading.log_fail_e_value >= reading.log_fail_threshold) {
    reading.verdict = GateVerdict::kFail;
  } else if (every_stratum_counted && reading.log_pass_e_value >= reading.log_threshold) {
    reading.verdict = GateVerdict::kPass;
  } else if (!every_stratum_counted) {
    std::vector<std::string> short_classes;
    for (const StratumReading& stratum : reading.strata) {
      if (stratum.counts.member_trials < settings.min_member_trials ||
          stratum.counts.control_trials < settings.min_control_trials) {
        short_classes.push_back(absl::StrCat(std::string(policy::HardwareClassName(stratum.hardware_class)),
                                             " ", stratum.counts.member_trials, "/",
                                             stratum.counts.control_trials));
      }
    }
    reading.why_inconclusive = absl::StrCat(
        "needs ", settings.min_member_trials, " member and ", settings.min_control_trials,
        " control trials per class (", absl::StrJoin(short_classes, ", "), ")");
  } else {
    reading.why_inconclusive = "not enough evidence either way yet";
  }
  return reading;
}

namespace {

// One concluded device as the conditional test reads it.
struct OrderedTrial {
  absl::Time at;
  bool member = false;
  v1::Outcome outcome = v1::OUTCOME_UNSPECIFIED;
  bool silent = false;
  std::string device_id;
  uint32_t tie = 0;
};

// The concluded members and control devices of one class, in the order
// their conclusions were observed: a report at its observed_at, a silent
// member at its deadline.
std::vector<OrderedTrial> OrderedTrials(const v1::Rollout& rollout,
                                        const std::vector<CohortDevice>& members,
                                        const std::vector<CohortDevice>& control, absl::Time now,
                                        absl::Duration reach_timeout) {
  std::vector<OrderedTrial> trials;
  for (const CohortDevice& member : members) {
    switch (StandingOf(rollout, member, now, reach_timeout)) {
      case MemberStanding::kSucceeded:
      case MemberStanding::kFailed:
      case MemberStanding::kRolledBack:
        trials.push_back({member.outcomes.lifecycle_at, true, member.outcomes.lifecycle, false,
                          member.device_id});
        break;
      case MemberStanding::kSilent: {
        const uint32_t stage = AdmittingStage(rollout, member.device_id);
        const absl::Time deadline =
            std::max(FromProtoTime(rollout.stage_entered_at(stage)), member.first_shaped_resolve) +
            absl::Seconds(rollout.stages(stage).report_timeout_seconds());
        trials.push_back({deadline, true, v1::OUTCOME_UNSPECIFIED, true, member.device_id});
        break;
      }
      default:
        break;
    }
  }
  for (const CohortDevice& device : control) {
    const v1::Outcome outcome = device.outcomes.lifecycle;
    if (outcome == v1::OUTCOME_ENGINE_STARTED || IsBuildFailure(outcome)) {
      trials.push_back({device.outcomes.lifecycle_at, false, outcome, false, device.device_id});
    }
  }
  // Reports observed at the same moment are taken in the order of a hash
  // of their ids, which mixes the sides as arrivals would and never looks
  // at outcomes; then by id, so every pass orders them the same way.
  for (OrderedTrial& trial : trials) trial.tie = RolloutBucket(rollout.id(), trial.device_id);
  std::sort(trials.begin(), trials.end(), [](const OrderedTrial& a, const OrderedTrial& b) {
    if (a.at != b.at) return a.at < b.at;
    if (a.tie != b.tie) return a.tie < b.tie;
    return a.device_id < b.device_id;
  });
  return trials;
}

bool FailsGate(std::string_view gate, const OrderedTrial& trial) {
  if (gate == "boot") return trial.outcome == v1::OUTCOME_BOOT_FAILED;
  if (gate == "artifact") return trial.outcome == v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED;
  if (gate == "engine") {
    return trial.outcome == v1::OUTCOME_ENGINE_START_FAILED ||
           trial.outcome == v1::OUTCOME_ROLLED_BACK;
  }
  return gate == "silent" && trial.silent;
}

}  // namespace

std::vector<SequentialGateReading> JudgeSequentialGates(const v1::Rollout& rollout,
                                                        const std::vector<CohortDevice>& members,
                                                        const std::vector<CohortDevice>& control,
                                                        absl::Time now,
                                                        absl::Duration reach_timeout) {
  std::vector<SequentialGateReading> readings;
  if (!rollout.gates().has_sequential()) return readings;
  std::map<policy::HardwareClass, std::vector<CohortDevice>> members_by_class;
  std::map<policy::HardwareClass, std::vector<CohortDevice>> control_by_class;
  for (const CohortDevice& device : members) members_by_class[device.hardware_class].push_back(device);
  for (const CohortDevice& device : control) control_by_class[device.hardware_class].push_back(device);
  if (control_by_class.empty()) return readings;

  struct ClassCounts {
    policy::HardwareClass hardware_class;
    v1::CohortOutcomes members;
    v1::CohortOutcomes control;
    std::vector<OrderedTrial> trials;  // concluded devices in observed order
  };
  std::vector<ClassCounts> classes;
  std::vector<std::string> unmatched;
  for (const auto& [hardware_class, class_members] : members_by_class) {
    auto found = control_by_class.find(hardware_class);
    if (found == control_by_class.end()) {
      unmatched.push_back(std::string(policy::HardwareClassName(hardware_class)));
      continue;
    }
    classes.push_back({hardware_class, CountMembers(rollout, class_members, now, reach_timeout),
                       CountControl(found->second),
                       OrderedTrials(rollout, class_members, found->second, now, reach_timeout)});
  }

  const SequentialGateTest test(SequentialSettingsFor(rollout));
  using Extract = FailureCounts (*)(const v1::CohortOutcomes&, const v1::CohortOutcomes&);
  struct Gate {
    const char* name;
    Extract extract;
  };
  static constexpr Gate kGates[] = {
      {"boot",
       [](const v1::CohortOutcomes& m, const v1::CohortOutcomes& c) {
         return FailureCounts{m.boot_failed(), Concluded(m), c.boot_failed(), Concluded(c)};
       }},
      {"artifact",
       [](const v1::CohortOutcomes& m, const v1::CohortOutcomes& c) {
         return FailureCounts{m.artifact_failed(), Concluded(m), c.artifact_failed(), Concluded(c)};
       }},
      {"engine",
       [](const v1::CohortOutcomes& m, const v1::CohortOutcomes& c) {
         return FailureCounts{m.engine_failed(), Concluded(m), c.engine_failed(), Concluded(c)};
       }},
      {"silent",
       [](const v1::CohortOutcomes& m, const v1::CohortOutcomes& c) {
         return FailureCounts{m.silent(), Concluded(m), c.silent(), Concluded(c)};
       }},
      {"task",
       [](const v1::CohortOutcomes& m, const v1::CohortOutcomes& c) {
         uint64_t member_failed = m.tasks_undone() + m.tasks_failed();
         uint64_t control_failed = c.tasks_undone() + c.tasks_failed();
         return FailureCounts{member_failed, m.tasks_completed() + member_failed, control_failed,
                              c.tasks_completed() + control_failed};
       }},
  };
  const SequentialGateSettings& settings = test.settings();
  for (const Gate& gate : kGates) {
    // Tasks carry no time of their own: that gate keeps universal inference.
    const bool conditional = settings.conditional && std::string_view(gate.name) != "task";
    std::vector<StratumReading> strata;
    double smallest_p = 1;
    for (const ClassCounts& each : classes) {
      StratumReading stratum;
      stratum.hardware_class = each.hardware_class;
      stratum.counts = gate.extract(each.members, each.control);
      if (conditional) {
        ConditionalEProcess process(settings.min_relative_increase);
        for (const OrderedTrial& trial : each.trials) {
          process.Add(trial.member, FailsGate(gate.name, trial));
        }
        stratum.log_fail_e_value = process.LogEValue();
        const FailureCounts& c = stratum.counts;
        smallest_p = std::min(smallest_p, FisherUpperTail(c.member_trials, c.control_trials,
                                                          c.member_failures + c.control_failures,
                                                          c.member_failures));
      }
      strata.push_back(stratum);
    }
    SequentialGateReading reading = JudgeGate(gate.name, test, std::move(strata), conditional);
    if (conditional && !classes.empty()) {
      reading.horizon_alpha = settings.stage_false_pause_rate * kHorizonShareOfFalsePauseRate;
      reading.horizon_p_value =
          std::min(1.0, smallest_p * static_cast<double>(classes.size()));
    }
    const bool nothing_measured =
        reading.totals.member_trials == 0 && reading.totals.control_trials == 0;
    if (std::string_view(gate.name) == "task" && nothing_measured && unmatched.empty()) {
      // No device of either side runs a task harness: there is nothing this
      // gate could ever judge, and holding for it would stall every fleet
      // without one. One side reporting tasks and the other not stays
      // inconclusive.
      reading.verdict = GateVerdict::kPass;
      reading.why_inconclusive.clear();
    }
    if (!unmatched.empty() && reading.verdict != GateVerdict::kFail) {
      reading.verdict = GateVerdict::kInconclusive;
      reading.why_inconclusive = absl::StrCat("no control devices of class ",
                                              absl::StrJoin(unmatched, ", "), " to compare with");
    }
    readings.push_back(std::move(reading));
  }
  return readings;
}

std::string DescribeSequentialGate(const SequentialGateReading& reading) {
  const FailureCounts& totals = reading.totals;
  std::string evidence;
  switch (reading.verdict) {
    case GateVerdict::kFail:
      evidence = absl::StrFormat(", e-value %.3g >= %.3g", std::exp(reading.log_fail_e_value),
                                 std::exp(reading.log_fail_threshold));
      break;
    case GateVerdict::kPass:
      evidence = absl::StrFormat(", pass e-value %.3g >= %.3g", std::exp(reading.log_pass_e_value),
                                 std::exp(reading.log_threshold));
      break;
    case GateVerdict::kInconclusive:
      evidence = absl::StrFormat(", e-values fail %.3g pass %.3g < %.3g: %s",
                                 std::exp(reading.log_fail_e_value),
                                 std::exp(reading.log_pass_e_value),
                                 std::exp(reading.log_threshold), reading.why_inconclusive);
      break;
  }
  return absl::StrCat(reading.gate, " gate: ", GateVerdictName(reading.verdict), evidence,
                      " (members ", totals.member_failures, "/", totals.member_trials,
                      " failed, control ", totals.control_failures, "/", totals.control_trials,
                      ")");
}

v1::SequentialGateStatus SequentialGateStatusOf(const SequentialGateReading& reading) {
  v1::SequentialGateStatus status;
  status.set_gate(reading.gate);
  status.set_verdict(std::string(GateVerdictName(reading.verdict)));
  status.set_fail_e_value(std::exp(reading.log_fail_e_value));
  status.set_pass_e_value(std::exp(reading.log_pass_e_value));
  status.set_threshold(std::exp(reading.log_threshold));
  status.set_fail_threshold(std::exp(reading.log_fail_threshold));
  status.set_horizon_p_value(reading.horizon_p_value);
  status.set_horizon_alpha(reading.horizon_alpha);
  status.set_inconclusive_reason(reading.why_inconclusive);
  for (const StratumReading& stratum : reading.strata) {
    v1::SequentialGateClass* each = status.add_classes();
    each->set_hardware_class(std::string(policy::HardwareClassName(stratum.hardware_class)));
    each->set_member_failures(stratum.counts.member_failures);
    each->set_member_trials(stratum.counts.member_trials);
    each->set_control_failures(stratum.counts.control_failures);
    each->set_control_trials(stratum.counts.control_trials);
    each->set_fail_e_value(std::exp(stratum.log_fail_e_value));
    each->set_pass_e_value(std::exp(stratum.log_pass_e_value));
  }
  return status;
}

}  // namespace weightpath::deploy
