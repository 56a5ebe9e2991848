#include "agent/decision/offline_decision.h"

#include "common/status_macros.h"
#include "policy/hardware_class.h"
#include "policy/policy.h"

namespace weightpath::agent {

absl::StatusOr<v1::ResolveWeightPathResponse> EvaluateOffline(const v1::HardwareProfile& profile,
                                                              const AgentConfig& config) {
  const std::shared_ptr<const policy::Policy> default_policy = policy::DefaultPolicy();
  ASSIGN_OR_RETURN(policy::Decision decision,
                   policy::Evaluate(*default_policy, profile, config.priority, config.labels));
  v1::ResolveWeightPathResponse response;
  response.set_hardware_class(std::string(policy::HardwareClassName(decision.hardware_class)));
  policy::FillWeightPathSpec(*decision.path, response.mutable_weight_path());
  v1::Verification* verification = response.mutable_weight_path()->mutable_verification();
  verification->set_source(v1::Verification::SOURCE_NONE);
  verification->set_reason("decided offline on the device; no fleet evidence was consulted");
  policy::FillEngineKwargs(*decision.path, response.mutable_engine_kwargs());
  response.set_effective_priority(decision.effective_priority);
  response.set_policy_version(default_policy->version());
  response.set_matched_rule(decision.rule->name);
  response.set_model(config.model);
  return response;
}

}  // namespace weightpath::agent
