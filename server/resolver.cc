#include "server/resolver.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/rollout_resolve.h"

namespace weightpath::server {

absl::Status Resolve(const v1::ResolveWeightPathRequest& request, const Snapshot& snapshot,
                     v1::ResolveWeightPathResponse* response, ResolveSummary* summary,
                     const std::vector<v1::Rollout>& rollouts, std::vector<std::string>* considered) {
  const policy::Policy& policy = *snapshot.policy;
  const Catalog& catalog = *snapshot.catalog;

  ASSIGN_OR_RETURN(ShapedResolve shaped, ResolveShaped(policy, request, rollouts));
  const policy::Decision& decision = shaped.resolution.decision;
  const policy::PathDefinition& path = *decision.path;
  summary->hardware_class = decision.hardware_class;
  summary->path_name = path.name;
  summary->effective_priority = decision.effective_priority;

  const std::string& model = request.model().empty() ? catalog.default_model() : request.model();
  const Catalog::ModelArtifacts* artifacts = catalog.FindModel(model);
  if (artifacts == nullptr) {
    return absl::NotFoundError(absl::StrCat("model \"", model,
                                            "\" is not in the catalog; known models: ",
                                            catalog.known_models()));
  }
  auto artifact_it = artifacts->find(path.name);
  if (artifact_it == artifacts->end()) {
    // Catalog loading checks every reachable path, so this means the policy
    // and catalog disagree in a way the load check missed.
    return absl::InternalError(absl::StrCat("catalog ", catalog.version(), " has no artifact for model \"",
                                            model, "\" path \"", path.name, "\""));
  }
  const CatalogArtifact& artifact = artifact_it->second;

  response->set_hardware_class(std::string(policy::HardwareClassName(decision.hardware_class)));
  v1::WeightPathSpec* spec = response->mutable_weight_path();
  policy::FillWeightPathSpec(path, spec);
  spec->set_verified(path.verified);
  v1::Verification* verification = spec->mutable_verification();
  if (path.verified) {
    verification->set_source(v1::Verification::SOURCE_POLICY);
    verification->set_reason("measured on hardware by the policy's authors");
  } else {
    verification->set_source(v1::Verification::SOURCE_NONE);
    verification->set_reason("not measured on this class of hardware yet");
  }
  v1::Artifact* artifact_out = response->mutable_artifact();
  artifact_out->set_uri(artifact.uri);
  artifact_out->set_sha256(artifact.sha256);
  artifact_out->set_size_bytes(artifact.size_bytes);
  artifact_out->set_version(artifact.version);
  policy::FillEngineKwargs(path, response->mutable_engine_kwargs());
  response->set_effective_priority(decision.effective_priority);
  response->set_policy_version(policy.version());
  if (decision.rule != nullptr) response->set_matched_rule(decision.rule->name);
  response->set_model(model);
  ApplyShaping(shaped, response);
  if (considered != nullptr) *considered = std::move(shaped.resolution.considered);
  return absl::OkStatus();
}

}  // namespace weightpath::server
