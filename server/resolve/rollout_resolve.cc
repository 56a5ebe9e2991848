#include "server/resolve/rollout_resolve.h"

#include "absl/strings/str_cat.h"

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
  shaped.failed_build_retry_seconds =
      static_cast<uint32_t>(absl::ToInt64Seconds(settings.failed_build_retry));
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
  response->set_failed_build_retry_seconds(shaped.failed_build_retry_seconds);
}

absl::Status CheckPinnedTarget(const CatalogTrust& trust, absl::string_view model,
                               absl::string_view path_name, ShapedResolve* shaped) {
  std::optional<v1::Artifact>& pinned = shaped->resolution.pinned_artifact;
  if (!pinned.has_value()) return absl::OkStatus();
  if (pinned->uri().empty() && pinned->files().empty() && !pinned->target_path().empty()) {
    const auto refuse = [&](absl::string_view why) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rollout '", shaped->resolution.attribution.rollout_id(),
          "' pins target_path \"", pinned->target_path(), "\", which ", why));
    };
    if (!trust.signed_catalog) {
      return refuse(
          "needs a signed catalog (a TUF repository) to be found in; with a plain catalog give "
          "the pin's uri, sha256 and size_bytes");
    }
    const auto build = trust.signed_builds.find(pinned->target_path());
    if (build == trust.signed_builds.end()) {
      return refuse("is no weightpath target of the verified catalog");
    }
    if (build->second.model != model) {
      return refuse(absl::StrCat("is a build of model \"", build->second.model,
                                 "\", not of the device's \"", model, "\""));
    }
    if (build->second.weight_path != path_name) {
      return refuse(absl::StrCat("is a build of weight path \"", build->second.weight_path,
                                 "\", not of the pinned \"", path_name, "\""));
    }
    if (!pinned->sha256().empty() && pinned->sha256() != build->second.artifact.sha256) {
      return refuse(absl::StrCat("is signed with sha256 ", build->second.artifact.sha256,
                                 ", not the pinned ", pinned->sha256()));
    }
    pinned->Clear();
    FillArtifact(build->second.artifact, &*pinned);
    return absl::OkStatus();
  }
  const auto target = trust.verified_targets.find(pinned->target_path());
  pinned->set_signed_target(trust.signed_catalog && !pinned->target_path().empty() &&
                            target != trust.verified_targets.end() &&
                            target->second.length == pinned->size_bytes() &&
                            target->second.sha256 == pinned->sha256());
  return absl::OkStatus();
}

}  // namespace weightpath::server
