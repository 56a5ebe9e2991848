#include "agent/decision/resolve_request.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace weightpath::agent {

v1::ResolveWeightPathRequest ResolveRequest(const AgentConfig& config,
                                            const v1::HardwareProfile& profile,
                                            const std::string& agent_version,
                                            const v1::ResolveWeightPathResponse* held) {
  v1::ResolveWeightPathRequest request;
  if (held != nullptr) request.set_known_decision_etag(held->decision_etag());
  request.set_device_id(config.device_id);
  *request.mutable_profile() = profile;
  request.set_priority(config.priority);
  request.set_model(config.model);
  *request.mutable_labels() = config.labels;
  request.set_agent_version(agent_version);
  // The build cache stages directory builds (fetch/build_cache.h).
  request.set_accepts_directory_builds(true);
  return request;
}

absl::StatusOr<v1::ResolveWeightPathResponse> DecisionFromAnswer(
    v1::ResolveWeightPathResponse answer, const v1::ResolveWeightPathResponse* held) {
  if (!answer.unchanged()) return answer;
  if (held == nullptr || held->decision_etag().empty() ||
      held->decision_etag() != answer.decision_etag()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ResolveWeightPath: the server answered \"unchanged\" for decision ",
        answer.decision_etag(), ", which this device does not hold"));
  }
  return *held;
}

}  // namespace weightpath::agent
