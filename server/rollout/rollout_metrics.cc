#include "server/rollout/rollout_metrics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "deploy/rollout_evaluation.h"
#include "policy/hardware_class.h"

namespace weightpath::server {
namespace {

// The gates deploy/ judges a rollout by (GateReading::gate and
// SequentialGateReading::gate).
constexpr const char* kGates[] = {"boot", "artifact", "engine", "silent", "task"};
constexpr const char* kCohorts[] = {"member", "control"};
constexpr const char* kSequentialVerdicts[] = {"pass", "fail", "inconclusive"};
// What a sequential gate counted in one hardware class and cohort.
constexpr const char* kSequentialCounts[] = {"failures", "trials"};


std::string WithoutPrefix(std::string name, absl::string_view prefix) {
  if (absl::StartsWith(name, prefix)) name = name.substr(prefix.size());
  return absl::AsciiStrToLower(name);
}

}  // namespace

std::string RolloutStateLabel(v1::RolloutState state) {
  return WithoutPrefix(v1::RolloutState_Name(state), "ROLLOUT_STATE_");
}

std::string OutcomeLabel(v1::Outcome outcome) {
  return WithoutPrefix(v1::Outcome_Name(outcome), "OUTCOME_");
}

RolloutMetrics::RolloutMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      stage_(prometheus::BuildGauge()
                 .Name("weightpath_rollout_stage")
                 .Help("Current stage index of each rollout (0 = first stage)")
                 .Register(*registry_)),
      state_(prometheus::BuildGauge()
                 .Name("weightpath_rollout_state")
                 .Help("1 for the state each rollout is in, 0 for the others")
                 .Register(*registry_)),
      members_(prometheus::BuildGauge()
                   .Name("weightpath_rollout_members")
                   .Help("Devices inside each rollout at its last evaluation")
                   .Register(*registry_)),
      stages_(prometheus::BuildGauge()
                  .Name("weightpath_rollout_stages")
                  .Help("Stages in each rollout's plan (the current one is "
                        "weightpath_rollout_stage + 1 of these)")
                  .Register(*registry_)),
      stage_fraction_(prometheus::BuildGauge()
                          .Name("weightpath_rollout_stage_fraction")
                          .Help("Share of the selected devices the current stage admits "
                                "(the stage's percent / 100)")
                          .Register(*registry_)),
      cohort_devices_(prometheus::BuildGauge()
                          .Name("weightpath_rollout_cohort_devices")
                          .Help("Devices in each cohort (member or control) at the last "
                                "evaluation")
                          .Register(*registry_)),
      cohort_reporting_(prometheus::BuildGauge()
                            .Name("weightpath_rollout_cohort_reporting")
                            .Help("Devices of each cohort that reported an outcome")
                            .Register(*registry_)),
      gate_failure_ratio_(prometheus::BuildGauge()
                              .Name("weightpath_rollout_gate_failure_ratio")
                              .Help("Failure rate each gate observed in each cohort at the last "
                                    "evaluation (0 to 1)")
                              .Register(*registry_)),
      gate_max_delta_(prometheus::BuildGauge()
                          .Name("weightpath_rollout_gate_max_delta")
                          .Help("Largest allowed excess of the members' failure rate over the "
                                "control's, per gate")
                          .Register(*registry_)),
      sequential_e_value_(prometheus::BuildGauge()
                              .Name("weightpath_rollout_sequential_gate_e_value")
                              .Help("Sequential gates: the evidence that members fail more "
                                    "often (fail) or not (pass) than control devices")
                              .Register(*registry_)),
      sequential_threshold_(prometheus::BuildGauge()
                                .Name("weightpath_rollout_sequential_gate_threshold")
                                .Help("Sequential gates: the e-value either side must reach "
                                      "(1 / the false-pause rate)")
                                .Register(*registry_)),
      sequential_verdict_(prometheus::BuildGauge()
                              .Name("weightpath_rollout_sequential_gate_verdict")
                              .Help("Sequential gates: 1 for each gate's verdict at the last "
                                    "evaluation (pass, fail or inconclusive), 0 for the others")
                              .Register(*registry_)),
      sequential_class_reports_(
          prometheus::BuildGauge()
              .Name("weightpath_rollout_sequential_gate_class_reports")
              .Help("Sequential gates: the failures and trials each gate judged in each "
                    "hardware class (members are compared with control devices of their own "
                    "class) and cohort at the last evaluation")
              .Register(*registry_)),
      outcomes_(prometheus::BuildCounter()
                    .Name("weightpath_rollout_outcomes_total")
                    .Help("Outcome reports by rollout and cohort (member or control)")
                    .Register(*registry_)),
      breaches_(prometheus::BuildCounter()
                    .Name("weightpath_rollout_gate_breaches_total")
                    .Help("Health gate breaches that paused or rolled back a rollout")
                    .Register(*registry_)),
      failures_after_completion_(
          prometheus::BuildGauge()
              .Name("weightpath_rollout_failures_after_completion")
              .Help("Members of a completed rollout whose latest report since completion is a "
                    "build failure (boot, artifact, engine start, rolled back), within the "
                    "rollout's watch after completion")
              .Register(*registry_)),
      detectable_ratio_(
          prometheus::BuildGauge()
              .Name("weightpath_rollout_stage_detectable_ratio")
              .Help("Planned power of each stage: the members' engine failure rate over the "
                    "control's that its fail test catches with 80% probability by the stage's "
                    "horizon (0: none, or no control to compare with)")
              .Register(*registry_)),
      settled_ratio_(prometheus::BuildGauge()
                         .Name("weightpath_rollout_stage_settled_ratio")
                         .Help("Horizon progress: the share of the current stage's members that "
                               "have concluded, timed out or gone unreached (1 at the horizon)")
                         .Register(*registry_)),
      horizon_time_(prometheus::BuildGauge()
                        .Name("weightpath_rollout_stage_horizon_timestamp_seconds")
                        .Help("When the current stage reaches its horizon at the latest (Unix "
                              "seconds; 0 before the first evaluation)")
                        .Register(*registry_)) {}

void RolloutMetrics::SetRollout(const v1::Rollout& rollout) {
  absl::MutexLock lock(&mutex_);
  stage_.Add({{"rollout", rollout.id()}}).Set(rollout.current_stage());
  members_.Add({{"rollout", rollout.id()}}).Set(static_cast<double>(rollout.all_members().devices()));
  failures_after_completion_.Add({{"rollout", rollout.id()}})
      .Set(static_cast<double>(rollout.failures_after_completion()));
  for (const v1::StagePlan& plan : rollout.stage_plans()) {
    detectable_ratio_.Add({{"rollout", rollout.id()}, {"stage", std::to_string(plan.stage() + 1)}})
        .Set(plan.detectable_ratio());
  }
  const v1::CohortOutcomes& admitted = rollout.members();
  settled_ratio_.Add({{"rollout", rollout.id()}})
      .Set(admitted.devices() == 0 ? 0
                                   : static_cast<double>(deploy::Settled(admitted)) /
                                         static_cast<double>(admitted.devices()));
  horizon_time_.Add({{"rollout", rollout.id()}})
      .Set(rollout.has_stage_horizon() ? static_cast<double>(rollout.stage_horizon().seconds()) : 0);
  stages_.Add({{"rollout", rollout.id()}}).Set(rollout.stages_size());
  const bool staged = rollout.current_stage() < static_cast<uint32_t>(rollout.stages_size());
  stage_fraction_.Add({{"rollout", rollout.id()}})
      .Set(staged ? rollout.stages(static_cast<int>(rollout.current_stage())).percent() / 100.0
                  : 0);
  for (const auto& [cohort, outcomes] :
       {std::pair<const char*, const v1::CohortOutcomes*>{"member", &rollout.members()},
        std::pair<const char*, const v1::CohortOutcomes*>{"control", &rollout.control()}}) {
    cohort_devices_.Add({{"rollout", rollout.id()}, {"cohort", cohort}})
        .Set(static_cast<double>(outcomes->devices()));
    cohort_reporting_.Add({{"rollout", rollout.id()}, {"cohort", cohort}})
        .Set(static_cast<double>(outcomes->reporting()));
  }
  // The same readings the reconciler judged by, from the counts it stored.
  for (const deploy::GateReading& reading :
       deploy::ReadGates(rollout.gates(), rollout.members(), rollout.control())) {
    gate_failure_ratio_.Add({{"rollout", rollout.id()}, {"gate", reading.gate}, {"cohort", "member"}})
        .Set(reading.member_rate);
    gate_failure_ratio_
        .Add({{"rollout", rollout.id()}, {"gate", reading.gate}, {"cohort", "control"}})
        .Set(reading.control_rate);
    gate_max_delta_.Add({{"rollout", rollout.id()}, {"gate", reading.gate}}).Set(reading.max_delta);
  }
  for (const v1::SequentialGateStatus& gate : rollout.sequential_gates()) {
    sequential_e_value_.Add({{"rollout", rollout.id()}, {"gate", gate.gate()}, {"evidence", "fail"}})
        .Set(gate.fail_e_value());
    sequential_e_value_.Add({{"rollout", rollout.id()}, {"gate", gate.gate()}, {"evidence", "pass"}})
        .Set(gate.pass_e_value());
    sequential_threshold_.Add({{"rollout", rollout.id()}, {"gate", gate.gate()}})
        .Set(gate.threshold());
    for (const char* verdict : kSequentialVerdicts) {
      sequential_verdict_
          .Add({{"rollout", rollout.id()}, {"gate", gate.gate()}, {"verdict", verdict}})
          .Set(gate.verdict() == verdict ? 1 : 0);
    }
    for (const v1::SequentialGateClass& counts : gate.classes()) {
      // Only the names policy/ classifies into become label values,
      // whatever a stored rollout holds.
      if (!policy::ParseHardwareClass(counts.hardware_class()).ok()) continue;
      const auto set = [&](const char* cohort, const char* count, uint64_t value) {
        sequential_class_reports_
            .Add({{"rollout", rollout.id()},
                  {"gate", gate.gate()},
                  {"hardware_class", counts.hardware_class()},
                  {"cohort", cohort},
                  {"count", count}})
            .Set(static_cast<double>(value));
      };
      set("member", "failures", counts.member_failures());
      set("member", "trials", counts.member_trials());
      set("control", "failures", counts.control_failures());
      set("control", "trials", counts.control_trials());
    }
  }
  for (int value = v1::ROLLOUT_STATE_PROGRESSING; value <= v1::ROLLOUT_STATE_ROLLED_BACK; ++value) {
    const auto state = static_cast<v1::RolloutState>(value);
    state_.Add({{"rollout", rollout.id()}, {"state", RolloutStateLabel(state)}})
        .Set(state == rollout.state() ? 1 : 0);
  }
  // At 0 from the rollout's first sight, so increase() sees the first
  // breach and the first report (Add keeps a series that exists).
  for (const char* gate : kGates) breaches_.Add({{"rollout", rollout.id()}, {"gate", gate}});
  for (const char* cohort : kCohorts) {
    for (int value = v1::Outcome_MIN + 1; value <= v1::Outcome_MAX; ++value) {
      if (!v1::Outcome_IsValid(value)) continue;
      outcomes_.Add({{"rollout", rollout.id()},
                     {"cohort", cohort},
                     {"outcome", OutcomeLabel(static_cast<v1::Outcome>(value))}});
    }
  }
}

void RolloutMetrics::CountOutcome(absl::string_view rollout_id, absl::string_view cohort,
                                  v1::Outcome outcome) {
  outcomes_
      .Add({{"rollout", std::string(rollout_id)},
            {"cohort", std::string(cohort)},
            {"outcome", OutcomeLabel(outcome)}})
      .Increment();
}

void RolloutMetrics::CountGateBreach(absl::string_view rollout_id, absl::string_view gate) {
  breaches_.Add({{"rollout", std::string(rollout_id)}, {"gate", std::string(gate)}}).Increment();
}

void RolloutMetrics::RemoveRollout(absl::string_view rollout_id) {
  absl::MutexLock lock(&mutex_);
  const std::string id(rollout_id);
  auto remove = [](auto& family, const prometheus::Labels& labels) {
    if (family.Has(labels)) family.Remove(&family.Add(labels));
  };
  for (auto* family : {&stage_, &members_, &stages_, &stage_fraction_, &failures_after_completion_,
                       &settled_ratio_, &horizon_time_}) {
    remove(*family, {{"rollout", id}});
  }
  // Stages are at most 100 (percents strictly increase up to 100).
  for (int stage = 1; stage <= 100; ++stage) {
    remove(detectable_ratio_, {{"rollout", id}, {"stage", std::to_string(stage)}});
  }
  for (const char* cohort : kCohorts) {
    remove(cohort_devices_, {{"rollout", id}, {"cohort", cohort}});
    remove(cohort_reporting_, {{"rollout", id}, {"cohort", cohort}});
    for (int value = v1::Outcome_MIN + 1; value <= v1::Outcome_MAX; ++value) {
      if (!v1::Outcome_IsValid(value)) continue;
      remove(outcomes_, {{"rollout", id},
                         {"cohort", cohort},
                         {"outcome", OutcomeLabel(static_cast<v1::Outcome>(value))}});
    }
  }
  for (const char* gate : kGates) {
    for (const char* cohort : kCohorts) {
      remove(gate_failure_ratio_, {{"rollout", id}, {"gate", gate}, {"cohort", cohort}});
    }
    remove(gate_max_delta_, {{"rollout", id}, {"gate", gate}});
    remove(sequential_threshold_, {{"rollout", id}, {"gate", gate}});
    for (const char* evidence : {"fail", "pass"}) {
      remove(sequential_e_value_, {{"rollout", id}, {"gate", gate}, {"evidence", evidence}});
    }
    for (const char* verdict : kSequentialVerdicts) {
      remove(sequential_verdict_, {{"rollout", id}, {"gate", gate}, {"verdict", verdict}});
    }
    for (const policy::HardwareClass hardware_class : policy::kAllHardwareClasses) {
      for (const char* cohort : kCohorts) {
        for (const char* count : kSequentialCounts) {
          const std::string class_name(policy::HardwareClassName(hardware_class));
          remove(sequential_class_reports_, {{"rollout", id},
                                             {"gate", gate},
                                             {"hardware_class", class_name},
                                             {"cohort", cohort},
                                             {"count", count}});
        }
      }
    }
    remove(breaches_, {{"rollout", id}, {"gate", gate}});
  }
  for (int value = v1::ROLLOUT_STATE_PROGRESSING; value <= v1::ROLLOUT_STATE_ROLLED_BACK; ++value) {
    remove(state_, {{"rollout", id}, {"state", RolloutStateLabel(static_cast<v1::RolloutState>(value))}});
  }
}

}  // namespace weightpath::server
