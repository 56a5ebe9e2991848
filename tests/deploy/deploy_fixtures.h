// Shared building blocks for the deploy suites: device profiles of each
// hardware class and a staged fidelity rollout for agentic devices.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "deploy/label_selector.h"
#include "common/proto_time.h"
#include "weightpath/v1/rollout.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::deploy::testing {

inline v1::HardwareProfile X86Profile(bool amx) {
  v1::HardwareProfile profile;
  profile.set_arch("x86_64");
  profile.set_cpu_model(amx ? "Intel Xeon Platinum 8480C" : "AMD EPYC 7763");
  profile.add_cpu_flags("avx512f");
  if (amx) {
    profile.add_cpu_flags("amx_tile");
    profile.add_cpu_flags("amx_bf16");
  }
  profile.set_accelerator("none");
  profile.set_supports_bf16(true);
  return profile;
}

inline v1::HardwareProfile Arm64Profile() {
  v1::HardwareProfile profile;
  profile.set_arch("aarch64");
  profile.add_cpu_flags("asimd");
  profile.set_accelerator("none");
  return profile;
}

inline v1::HardwareProfile CudaProfile() {
  v1::HardwareProfile profile;
  profile.set_arch("x86_64");
  profile.set_accelerator("cuda_discrete");
  profile.set_supports_bf16(true);
  return profile;
}

inline v1::HardwareProfile JetsonProfile() {
  v1::HardwareProfile profile;
  profile.set_arch("aarch64");
  profile.set_accelerator("cuda_unified");
  profile.set_supports_bf16(true);
  return profile;
}

inline Labels MakeLabels(std::initializer_list<std::pair<std::string, std::string>> entries) {
  Labels labels;
  for (const auto& [key, value] : entries) labels[key] = value;
  return labels;
}

inline absl::Time Epoch() { return absl::FromUnixSeconds(1'790'000'000); }

// workload=agentic -> fidelity, 1% -> 10% -> 50% -> 100%, each stage baking
// an hour and needing evidence from `min_reporting` members.
inline v1::Rollout FidelityForAgentic(const std::string& id, uint32_t min_reporting = 5) {
  v1::Rollout rollout;
  rollout.set_id(id);
  rollout.set_description("agentic devices onto the fidelity build");
  (*rollout.mutable_selector()->mutable_match_labels())["workload"] = "agentic";
  rollout.mutable_action()->set_set_priority(v1::PRIORITY_FIDELITY);
  for (uint32_t percent : {1u, 10u, 50u, 100u}) {
    v1::RolloutStage* stage = rollout.add_stages();
    stage->set_percent(percent);
    stage->set_min_bake_seconds(3600);
    stage->set_min_reporting_devices(min_reporting);
    stage->set_report_timeout_seconds(1800);
  }
  rollout.mutable_gates()->set_max_boot_failure_delta(0.05);
  rollout.mutable_gates()->set_max_engine_failure_delta(0.05);
  rollout.mutable_gates()->set_max_task_failure_delta(0.10);
  return rollout;
}

}  // namespace weightpath::deploy::testing
