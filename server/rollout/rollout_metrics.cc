#include "server/rollout/rollout_metrics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace weightpath::server {
namespace {

// The gates deploy/ judges a rollout by (GateReading::gate and
// SequentialGateReading::gate).
constexpr const char* kGates[] = {"boot", "artifact", "engine", "silent", "task"};
constexpr const char* kCohorts[] = {"member", "control"};

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
      outcomes_(prometheus::BuildCounter()
                    .Name("weightpath_rollout_outcomes_total")
                    .Help("Outcome reports by rollout and cohort (member or control)")
                    .Register(*registry_)),
      breaches_(prometheus::BuildCounter()
                    .Name("weightpath_rollout_gate_breaches_total")
                    .Help("Health gate breaches that paused or rolled back a rollout")
                    .Register(*registry_)) {}

void RolloutMetrics::SetRollout(const v1::Rollout& rollout) {
  absl::MutexLock lock(&mutex_);
  stage_.Add({{"rollout", rollout.id()}}).Set(rollout.current_stage());
  members_.Add({{"rollout", rollout.id()}}).Set(static_cast<double>(rollout.members().devices()));
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

}  // namespace weightpath::server
