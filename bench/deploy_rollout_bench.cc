// What the rollout logic adds to a resolve, and what one evaluation pass of
// a rollout over a 10,000-device fleet costs. Prints figures; asserts nothing.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "deploy/cohort_outcomes.h"
#include "deploy/label_selector.h"
#include "common/proto_time.h"
#include "deploy/rollout_bucket.h"
#include "deploy/rollout_evaluation.h"
#include "deploy/rollout_shaping.h"
#include "deploy/rollout_validation.h"

namespace weightpath::deploy {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'790'000'000);

v1::HardwareProfile AmxProfile() {
  v1::HardwareProfile profile;
  profile.set_arch("x86_64");
  profile.add_cpu_flags("avx512f");
  profile.add_cpu_flags("amx_tile");
  profile.set_accelerator("none");
  profile.set_supports_bf16(true);
  return profile;
}

// A running fidelity rollout for one label value, at 10%.
v1::Rollout RunningRollout(const std::string& id, const std::string& workload,
                           const policy::Policy& policy) {
  v1::Rollout spec;
  spec.set_id(id);
  (*spec.mutable_selector()->mutable_match_labels())["workload"] = workload;
  spec.mutable_action()->set_set_priority(v1::PRIORITY_FIDELITY);
  for (uint32_t percent : {1u, 10u, 50u, 100u}) {
    v1::RolloutStage* stage = spec.add_stages();
    stage->set_percent(percent);
    stage->set_min_bake_seconds(3600);
    stage->set_min_reporting_devices(10);
    stage->set_report_timeout_seconds(1800);
  }
  spec.mutable_gates()->set_max_boot_failure_delta(0.05);
  spec.mutable_gates()->set_max_engine_failure_delta(0.05);
  spec.mutable_gates()->set_max_task_failure_delta(0.10);
  v1::Rollout rollout = *StartRollout(spec, policy, kStart);
  EnterStage(1, kStart, &rollout);
  return rollout;
}

void BM_RolloutBucket(benchmark::State& state) {
  int i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(RolloutBucket("fidelity-agentic", absl::StrCat("edge-", i++)));
  }
}
BENCHMARK(BM_RolloutBucket);

void BM_ParseLabelSelector(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        ParseLabelSelector("workload=agentic,site in (lab,field),tier!=bronze,!legacy"));
  }
}
BENCHMARK(BM_ParseLabelSelector);

// One device resolve with N live rollouts, one of which makes it a member
// (the rest select other label values). 0 rollouts is the plain policy.
void BM_ResolveWithRollouts(benchmark::State& state) {
  std::shared_ptr<const policy::Policy> policy = policy::DefaultPolicy();
  std::vector<v1::Rollout> rollouts;
  for (int64_t i = 0; i < state.range(0); ++i) {
    rollouts.push_back(RunningRollout(absl::StrCat("rollout-", i),
                                      i == 0 ? "agentic" : absl::StrCat("other-", i), *policy));
  }
  v1::HardwareProfile profile = AmxProfile();
  Labels labels;
  labels["workload"] = "agentic";
  int device = 0;
  for (auto _ : state) {
    auto resolution = ResolveWithRollouts(*policy, profile, v1::PRIORITY_SPEED, labels,
                                          absl::StrCat("edge-", device++ % 1000), rollouts);
    benchmark::DoNotOptimize(resolution);
  }
}
BENCHMARK(BM_ResolveWithRollouts)->Arg(0)->Arg(1)->Arg(10)->Arg(100);

// One evaluation pass: split a fleet of N devices (30% selected) and judge
// the stage, as the server's reconcile loop does per rollout.
void BM_SplitAndEvaluateFleet(benchmark::State& state) {
  std::shared_ptr<const policy::Policy> policy = policy::DefaultPolicy();
  v1::Rollout rollout = RunningRollout("fidelity-agentic", "agentic", *policy);
  std::vector<FleetDevice> fleet;
  for (int64_t i = 0; i < state.range(0); ++i) {
    FleetDevice device;
    device.device_id = absl::StrFormat("edge-%05d", i);
    device.labels["workload"] = i % 10 < 3 ? "agentic" : "chat";
    device.on_rollout_build = {device.device_id, rollout.id(), v1::OUTCOME_ENGINE_STARTED};
    device.on_other_build = {device.device_id, "", v1::OUTCOME_ENGINE_STARTED};
    fleet.push_back(std::move(device));
  }
  absl::Time now = kStart + absl::Minutes(10);
  for (auto _ : state) {
    FleetSplit split = SplitFleet(rollout, fleet);
    benchmark::DoNotOptimize(EvaluateRollout(rollout, split.members, split.control, now));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_SplitAndEvaluateFleet)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace weightpath::deploy

BENCHMARK_MAIN();
