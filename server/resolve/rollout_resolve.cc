#include "server/resolve/rollout_resolve.h"

namespace weightpath::server {

absl::StatusOr<ShapedResolve> ResolveShaped(const policy::Policy& policy,
                                            policy::HardwareClass hardware_class,
                                            const v1::ResolveWeightPathRequest& request,
                                            const std::vector<v1::Rollout>& rollouts,
                                            const deploy::ResolveIntervalSettings& settings) {
  absl::StatusOr<deploy::RolloutResolution> resolution = deploy::ResolveWithRollouts(
      policy, hardware_class, request.profile(), request.priority(), request.labels(),
      request.device_id(), rollouts);
  if (!resolution.ok()) return resolution.status();
  ShapedResolve shaped;
  shaped.resolve_interval_seconds = deploy::SuggestedResolveIntervalSeconds(
      rollouts, request.labels(), resolution->decision.hardware_class, settings);
  shaped.resolution = *std::move(resolution);
  return shaped;
}

void ApplyShaping(const ShapedResolve& shaped, v1::ResolveWeightPathResponse* response) {
  if (!shaped.resolution.attribution.rollout_id().empty()) {
    *response->mutable_rollout() = shaped.resolution.attribution;
  }
  if (shaped.resolution.pinned_artifact.has_value()) {
    *response->mutable_artifact() = *shaped.resolution.pinned_artifact;
  }
  response->set_resolve_interval_seconds(shaped.resolve_interval_seconds);
}

void CheckPinnedTarget(const CatalogTrust& trust, ShapedResolve* shaped) {
  std::optional<v1::Artifact>& pinned = shaped->resolution.pinned_artifact;
  if (!pinned.has_value()) return;
  const auto target = trust.verified_targets.find(pinned->target_path());
  pinned->set_signed_target(trust.signed_catalog && !pinned->target_path().empty() &&
                            target != trust.verified_targets.end() &&
                            target->second.length == pinned->size_bytes() &&
                            target->second.sha256 == pinned->sha256());
}

}  // namespace weightpath::server
