// The rollout metrics. Rollout ids are chosen by operators and few, so they
// are fine as labels; device ids never appear.
//   weightpath_rollout_stage{rollout}                     current stage index (0-based)
//   weightpath_rollout_stages{rollout}                    stages in the plan: "stage k+1 of n"
//   weightpath_rollout_stage_fraction{rollout}            share of the selected fleet at this stage
//   weightpath_rollout_state{rollout,state}               1 for the current state
//   weightpath_rollout_members{rollout}                   members at the last evaluation
//   weightpath_rollout_cohort_devices{rollout,cohort}     cohort = member | control
//   weightpath_rollout_cohort_reporting{rollout,cohort}   devices that reported an outcome
//   weightpath_rollout_gate_failure_ratio{rollout,gate,cohort}  observed rate, as the gate reads it
//   weightpath_rollout_gate_max_delta{rollout,gate}       the largest allowed member - control
//   weightpath_rollout_sequential_gate_e_value{rollout,gate,evidence}  evidence = fail | pass
//   weightpath_rollout_sequential_gate_threshold{rollout,gate}
//   weightpath_rollout_sequential_gate_verdict{rollout,gate,verdict}  1 for the current verdict
//   weightpath_rollout_outcomes_total{rollout,cohort,outcome}
//   weightpath_rollout_gate_breaches_total{rollout,gate}
//   weightpath_rollout_failures_after_completion{rollout}  members failed since completion (watch)
//   weightpath_rollout_stage_detectable_ratio{rollout,stage}  planned power: ratio caught with 80%
//   weightpath_rollout_stage_settled_ratio{rollout}        horizon progress: members settled / admitted
//   weightpath_rollout_stage_horizon_timestamp_seconds{rollout}  when the stage reaches its horizon
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "weightpath/v1/rollout.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

class RolloutMetrics {
 public:
  explicit RolloutMetrics(std::shared_ptr<prometheus::Registry> registry);

  // Stage, state (every state series of the rollout, current one at 1),
  // cohorts and each gate as the last evaluation left them.
  void SetRollout(const v1::Rollout& rollout);
  void CountOutcome(absl::string_view rollout_id, absl::string_view cohort, v1::Outcome outcome);
  void CountGateBreach(absl::string_view rollout_id, absl::string_view gate);
  // Every series of a deleted rollout, so a scrape no longer shows it; its
  // counters start again from 0 if the id is used again.
  void RemoveRollout(absl::string_view rollout_id);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  absl::Mutex mutex_;  // Family::Add is thread-safe; this keeps state flips atomic
  prometheus::Family<prometheus::Gauge>& stage_;
  prometheus::Family<prometheus::Gauge>& state_;
  prometheus::Family<prometheus::Gauge>& members_;
  prometheus::Family<prometheus::Gauge>& stages_;
  prometheus::Family<prometheus::Gauge>& stage_fraction_;
  prometheus::Family<prometheus::Gauge>& cohort_devices_;
  prometheus::Family<prometheus::Gauge>& cohort_reporting_;
  prometheus::Family<prometheus::Gauge>& gate_failure_ratio_;
  prometheus::Family<prometheus::Gauge>& gate_max_delta_;
  prometheus::Family<prometheus::Gauge>& sequential_e_value_;
  prometheus::Family<prometheus::Gauge>& sequential_threshold_;
  prometheus::Family<prometheus::Gauge>& sequential_verdict_;
  prometheus::Family<prometheus::Gauge>& sequential_class_reports_;
  prometheus::Family<prometheus::Counter>& outcomes_;
  prometheus::Family<prometheus::Counter>& breaches_;
  prometheus::Family<prometheus::Gauge>& failures_after_completion_;
  prometheus::Family<prometheus::Gauge>& detectable_ratio_;
  prometheus::Family<prometheus::Gauge>& settled_ratio_;
  prometheus::Family<prometheus::Gauge>& horizon_time_;
};

// "progressing", "paused", ... (the enum name without its prefix, lowercase).
std::string RolloutStateLabel(v1::RolloutState state);
// "engine_started", "tasks", ... likewise.
std::string OutcomeLabel(v1::Outcome outcome);

}  // namespace weightpath::server
