// Simulated rollout stages judged after every report, side by side on the
// same fleets in the same run: the conditional fail test with its horizon
// test (deploy/conditional_fail_test.h, the default), universal inference
// advancing only on a pass (the rule before horizons, advance: on_pass),
// Fisher's exact test read once at the horizon, and the threshold gates.
// Prints a table; asserts nothing.
//
//   deploy_gates_bench [--rollouts=1000] [--members=1000] [--control=4000]
//                      [--control_rate=0.02] [--ratio=2] [--seed=20261201]
//                      [--alpha=0.01] [--stages_with_control=1] [--classes=1]
//                      [--order=random|hourly|late] [--universal=1]
//                      [--horizon_share=0.5]
//
// --order: random interleaves the reports uniformly; hourly has members
// report within 10 min of a first check-in spread over 1.2 h (an hourly
// resolve interval with the agent's jitter) while control devices report
// evenly over 2 h; late has every member check in over an hour after the
// stage opened (1 h + the same), control over 2.5 h. --universal=0 skips
// the (slow) universal-inference judge.
//
// Each rollout is one stage: `members` member devices and `control` control
// devices, every one reporting once, in a random order; a member fails with
// probability control_rate * ratio (1 for the equal-rate fleets), a control
// device with control_rate. With --classes=N the devices are spread evenly
// over N hardware classes whose base rates are control_rate times 0.5, 1,
// 2, ... so that stratification matters. "Detected" means paused before the
// last member reported, i.e. before the stage completed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "deploy/cohort_outcomes.h"
#include "deploy/conditional_fail_test.h"
#include "deploy/rollout_evaluation.h"
#include "deploy/sequential_gates.h"
#include "policy/hardware_class.h"

namespace weightpath::deploy {
namespace {

struct Options {
  int rollouts = 1000;
  int members = 1000;
  int control = 4000;
  double control_rate = 0.02;
  double ratio = 2.0;
  uint64_t seed = 20261201;
  double alpha = 0.01;
  int stages_with_control = 1;
  int classes = 1;
  std::string order = "random";
  bool universal = true;
  double horizon_share = kHorizonShareOfFalsePauseRate;
};

bool ParseFlag(const char* arg, const char* name, std::string* value) {
  size_t length = std::strlen(name);
  if (std::strncmp(arg, name, length) != 0 || arg[length] != '=') return false;
  *value = arg + length + 1;
  return true;
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string value;
    if (ParseFlag(argv[i], "--rollouts", &value)) {
      options.rollouts = std::atoi(value.c_str());
    } else if (ParseFlag(argv[i], "--members", &value)) {
      options.members = std::atoi(value.c_str());
    } else if (ParseFlag(argv[i], "--control", &value)) {
      options.control = std::atoi(value.c_str());
    } else if (ParseFlag(argv[i], "--control_rate", &value)) {
      options.control_rate = std::atof(value.c_str());
    } else if (ParseFlag(argv[i], "--ratio", &value)) {
      options.ratio = std::atof(value.c_str());
    } else if (ParseFlag(argv[i], "--seed", &value)) {
      options.seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (ParseFlag(argv[i], "--alpha", &value)) {
      options.alpha = std::atof(value.c_str());
    } else if (ParseFlag(argv[i], "--stages_with_control", &value)) {
      options.stages_with_control = std::atoi(value.c_str());
    } else if (ParseFlag(argv[i], "--classes", &value)) {
      options.classes = std::atoi(value.c_str());
    } else if (ParseFlag(argv[i], "--order", &value)) {
      options.order = value;
      if (value != "random" && value != "hourly" && value != "late") {
        std::fprintf(stderr, "--order is random, hourly or late\n");
        std::exit(2);
      }
    } else if (ParseFlag(argv[i], "--horizon_share", &value)) {
      options.horizon_share = std::atof(value.c_str());
    } else if (ParseFlag(argv[i], "--universal", &value)) {
      options.universal = value != "0";
    } else {
      std::fprintf(stderr, "unknown flag %s (see the comment at the top of %s)\n", argv[i],
                   __FILE__);
      std::exit(2);
    }
  }
  return options;
}

// Today's gate as EvaluateRollout reads it: once min_reporting members have
// concluded, the members' rate may exceed the control's by max_delta.
struct ThresholdJudge {
  double max_delta;
  uint64_t min_reporting;
};

constexpr ThresholdJudge kThresholdJudges[] = {{0.01, 20}, {0.02, 20}, {0.05, 20}};
constexpr int kThresholdCount = sizeof(kThresholdJudges) / sizeof(kThresholdJudges[0]);

// What one judge did over one stage.
struct Outcome {
  bool paused = false;            // before the horizon (the last report)
  bool paused_at_horizon = false;  // by the test read at the horizon
  int member_reports_at_pause = 0;
  bool passed = false;  // advanced by the horizon
};

struct ArmTally {
  std::vector<Outcome> conditional;
  std::vector<Outcome> sequential;  // universal inference, on_pass
  std::vector<Outcome> fixed;       // Fisher's exact test read once at the horizon
  std::vector<std::vector<Outcome>> threshold{kThresholdCount};
};

struct Device {
  bool member;
  int hardware_class;
  bool fails;
  double at = 0;  // when it reports, hours after the stage opened
};

const policy::HardwareClass kClasses[] = {
    policy::HardwareClass::kX86Cpu, policy::HardwareClass::kArm64Cpu,
    policy::HardwareClass::kJetson, policy::HardwareClass::kCudaDiscrete,
    policy::HardwareClass::kNpuPhone};

void SimulateStage(const Options& options, double ratio, const SequentialGateTest& test,
                   std::mt19937_64& random, ArmTally* tally) {
  std::vector<Device> devices;
  std::uniform_real_distribution<double> uniform(0, 1);
  const bool late = options.order == "late";
  for (int i = 0; i < options.members + options.control; ++i) {
    Device device;
    device.member = i < options.members;
    device.hardware_class = i % options.classes;
    double base = options.control_rate * (options.classes == 1 ? 1.0 : 0.5 * (1 << device.hardware_class));
    device.fails = uniform(random) < (device.member ? std::min(1.0, base * ratio) : base);
    if (device.member) {
      device.at = (late ? 1.0 : 0.0) + 1.2 * uniform(random) + uniform(random) / 6;
    } else {
      device.at = (late ? 2.5 : 2.0) * uniform(random);
    }
    devices.push_back(device);
  }
  if (options.order == "random") {
    std::shuffle(devices.begin(), devices.end(), random);
  } else {
    std::sort(devices.begin(), devices.end(),
              [](const Device& a, const Device& b) { return a.at < b.at; });
  }

  std::vector<StratumReading> strata(options.classes);
  for (int c = 0; c < options.classes; ++c) strata[c].hardware_class = kClasses[c];
  const SequentialGateSettings& settings = test.settings();
  std::vector<ConditionalEProcess> processes(
      options.classes, ConditionalEProcess(settings.min_relative_increase));
  // The conditional test spends its share of the stage's rate before the
  // horizon and the rest at it, as JudgeSequentialGates does.
  const double log_conditional_threshold =
      test.LogThreshold() - std::log(1 - options.horizon_share);
  v1::HealthGates gates;
  v1::CohortOutcomes members;
  v1::CohortOutcomes control;
  Outcome conditional;
  Outcome sequential;
  Outcome fixed;
  std::vector<Outcome> threshold(kThresholdCount);
  int member_reports = 0;
  for (const Device& device : devices) {
    FailureCounts& counts = strata[device.hardware_class].counts;
    v1::CohortOutcomes& pooled = device.member ? members : control;
    if (device.member) {
      ++member_reports;
      ++counts.member_trials;
      counts.member_failures += device.fails;
    } else {
      ++counts.control_trials;
      counts.control_failures += device.fails;
    }
    if (device.fails) {
      pooled.set_boot_failed(pooled.boot_failed() + 1);
    } else {
      pooled.set_engine_started(pooled.engine_started() + 1);
    }
    processes[device.hardware_class].Add(device.member, device.fails);
    if (!conditional.paused) {
      std::vector<double> logs;
      for (const ConditionalEProcess& process : processes) logs.push_back(process.LogEValue());
      double largest = *std::max_element(logs.begin(), logs.end());
      double sum = 0;
      for (double each : logs) sum += std::exp(each - largest);
      const double log_mean = largest + std::log(sum / static_cast<double>(logs.size()));
      if (log_mean >= log_conditional_threshold) {
        conditional.paused = true;
        conditional.member_reports_at_pause = member_reports;
      }
    }
    // A pause ends the stage for that judge; a sequential pass is kept
    // watching so that a later fail still counts (the stage would not wait).
    if (options.universal && !sequential.paused) {
      SequentialGateReading reading = JudgeGate("boot", test, strata);
      if (reading.verdict == GateVerdict::kFail) {
        sequential.paused = true;
        sequential.member_reports_at_pause = member_reports;
      } else if (reading.verdict == GateVerdict::kPass) {
        sequential.passed = true;
      }
    }
    for (int t = 0; t < kThresholdCount; ++t) {
      if (threshold[t].paused || Concluded(members) < kThresholdJudges[t].min_reporting) continue;
      gates.set_max_boot_failure_delta(kThresholdJudges[t].max_delta);
      if (ReadGates(gates, members, control)[0].breached) {
        threshold[t].paused = true;
        threshold[t].member_reports_at_pause = member_reports;
      }
    }
  }
  // The horizon: every device has reported. Fisher per class, Bonferroni.
  const auto fisher_rejects = [&](double alpha) {
    double smallest = 1;
    for (const StratumReading& stratum : strata) {
      const FailureCounts& c = stratum.counts;
      smallest = std::min(smallest, FisherUpperTail(c.member_trials, c.control_trials,
                                                    c.member_failures + c.control_failures,
                                                    c.member_failures));
    }
    return smallest * static_cast<double>(strata.size()) <= alpha;
  };
  if (!conditional.paused) {
    conditional.paused_at_horizon =
        fisher_rejects(settings.stage_false_pause_rate * options.horizon_share);
    conditional.passed = !conditional.paused_at_horizon;
  }
  fixed.paused_at_horizon = fisher_rejects(settings.stage_false_pause_rate);
  fixed.passed = !fixed.paused_at_horizon;
  if (sequential.paused) sequential.passed = false;
  for (Outcome& each : threshold) each.passed = !each.paused;
  tally->conditional.push_back(conditional);
  tally->sequential.push_back(sequential);
  tally->fixed.push_back(fixed);
  for (int t = 0; t < kThresholdCount; ++t) tally->threshold[t].push_back(threshold[t]);
}

double Share(const std::vector<Outcome>& outcomes, bool Outcome::*field) {
  int count = 0;
  for (const Outcome& each : outcomes) count += each.*field;
  return 100.0 * count / static_cast<double>(outcomes.size());
}

std::string MedianReports(const std::vector<Outcome>& outcomes) {
  std::vector<int> reports;
  for (const Outcome& each : outcomes) {
    if (each.paused) reports.push_back(each.member_reports_at_pause);
  }
  if (reports.empty()) return "-";
  std::sort(reports.begin(), reports.end());
  return absl::StrFormat("%d", reports[reports.size() / 2]);
}

double Caught(const std::vector<Outcome>& outcomes) {
  int count = 0;
  for (const Outcome& each : outcomes) count += each.paused || each.paused_at_horizon;
  return 100.0 * count / static_cast<double>(outcomes.size());
}

void PrintRow(const std::string& judge, const std::vector<Outcome>& equal,
              const std::vector<Outcome>& worse) {
  std::printf("| %-52s | %7.1f%% | %7.1f%% | %7.1f%% | %7.1f%% | %7s |\n", judge.c_str(),
              Caught(equal), Share(equal, &Outcome::passed), Share(worse, &Outcome::paused),
              Caught(worse), MedianReports(worse).c_str());
}

int Run(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  SequentialGateSettings settings;
  settings.false_pause_rate = options.alpha;
  settings.stage_false_pause_rate = options.alpha / std::max(1, options.stages_with_control);
  const SequentialGateTest test(settings);

  const auto started = std::chrono::steady_clock::now();
  std::mt19937_64 random(options.seed);
  ArmTally equal;
  ArmTally worse;
  for (int i = 0; i < options.rollouts; ++i) SimulateStage(options, 1.0, test, random, &equal);
  for (int i = 0; i < options.rollouts; ++i) {
    SimulateStage(options, options.ratio, test, random, &worse);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::printf(
      "%d rollouts per arm, one stage of %d members and %d control devices in %d class%s, "
      "control failure rate %.3g, seed %llu\n",
      options.rollouts, options.members, options.control, options.classes,
      options.classes == 1 ? "" : "es", options.control_rate,
      static_cast<unsigned long long>(options.seed));
  std::printf(
      "sequential: alpha %.3g over %d stage%s with control (%.3g for this stage), min increase "
      "%.2gx and +%.3g\n\n",
      settings.false_pause_rate, options.stages_with_control,
      options.stages_with_control == 1 ? "" : "s", settings.stage_false_pause_rate,
      settings.min_relative_increase, settings.min_absolute_increase);
  std::printf("| %-52s | %8s | %8s | %8s | %8s | %7s |\n", "judge (read after every report)",
              "eq pause", "eq adv.", absl::StrFormat("%.3gx pre", options.ratio).c_str(),
              absl::StrFormat("%.3gx by", options.ratio).c_str(), "median");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(54, '-').c_str(), std::string(10, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str(),
              std::string(10, '-').c_str(), std::string(9, '-').c_str());
  PrintRow(absl::StrFormat("conditional SPRT %.2g + Fisher at horizon %.2g",
                           settings.stage_false_pause_rate * (1 - options.horizon_share),
                           settings.stage_false_pause_rate * options.horizon_share),
           equal.conditional, worse.conditional);
  if (options.universal) {
    PrintRow(absl::StrFormat("universal inference %.3g, advance on pass (before)",
                             settings.stage_false_pause_rate),
             equal.sequential, worse.sequential);
  }
  PrintRow(absl::StrFormat("Fisher's exact %.3g, read once at the horizon",
                           settings.stage_false_pause_rate),
           equal.fixed, worse.fixed);
  for (int t = 0; t < kThresholdCount; ++t) {
    PrintRow(absl::StrFormat("threshold: delta > %.2f once %d members concluded",
                             kThresholdJudges[t].max_delta, kThresholdJudges[t].min_reporting),
             equal.threshold[t], worse.threshold[t]);
  }
  std::printf(
      "\neq pause: equal-rate stages paused (false pauses, before or at the horizon); eq adv.:\n"
      "equal-rate stages advanced by the horizon (the last report); %.3gx pre: worse stages\n"
      "paused before the horizon; %.3gx by: paused before or at it; median: member reports\n"
      "at a pause before it. Reports in %s order. %.1f s for %d stages (%d reports each)\n",
      options.ratio, options.ratio, options.order.c_str(), seconds, 2 * options.rollouts,
      options.members + options.control);
  return 0;
}

}  // namespace
}  // namespace weightpath::deploy

int main(int argc, char** argv) { return weightpath::deploy::Run(argc, argv); }
