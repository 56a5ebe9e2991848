#include "ctl/resolve_offline.h"

#include <string>

namespace weightpath::ctl {

absl::StatusOr<v1::ResolveWeightPathResponse> ResolveOffline(
    const policy::Policy& policy, const v1::ResolveWeightPathRequest& request) {
  absl::StatusOr<policy::Decision> decision =
      policy::Evaluate(policy, request.profile(), request.priority(), request.labels());
  if (!decision.ok()) return decision.status();
  v1::ResolveWeightPathResponse response;
  response.set_hardware_class(std::string(policy::HardwareClassName(decision->hardware_class)));
  policy::FillWeightPathSpec(*decision->path, response.mutable_weight_path());
  policy::FillEngineKwargs(*decision->path, response.mutable_engine_kwargs());
  response.set_effective_priority(decision->effective_priority);
  response.set_policy_version(policy.version());
  response.set_matched_rule(decision->rule->name);
  response.set_model(request.model());
  // Present but empty: offline there is no catalog to name a download.
  response.mutable_artifact();
  return response;
}

}  // namespace weightpath::ctl
