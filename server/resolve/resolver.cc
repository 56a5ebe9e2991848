#include "server/resolve/resolver.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/deterministic_bytes.h"
#include "common/status_macros.h"
#include "deploy/resolve_interval.h"
#include "server/config/content_hash.h"

namespace weightpath::server {

namespace {

// The catalog's part of a decision: the model asked for (or the default) and
// its artifact for the decided path.
absl::Status AttachArtifact(const v1::ResolveWeightPathRequest& request, const Catalog& catalog,
                            ResolvedDecision* resolved) {
  resolved->model = request.model().empty() ? &catalog.default_model() : &request.model();
  const Catalog::ModelArtifacts* artifacts = catalog.FindModel(*resolved->model);
  if (artifacts == nullptr) {
    return absl::NotFoundError(absl::StrCat("model \"", *resolved->model,
                                            "\" is not in the catalog; known models: ",
                                            catalog.known_models()));
  }
  auto artifact_it = artifacts->find(resolved->path->name);
  if (artifact_it == artifacts->end()) {
    // Catalog loading checks every reachable path, so this means the policy
    // and catalog disagree in a way the load check missed.
    return absl::InternalError(absl::StrCat("catalog ", catalog.version(), " has no artifact for model \"",
                                            *resolved->model, "\" path \"", resolved->path->name, "\""));
  }
  resolved->artifact = &artifact_it->second;
  resolved->profile = &request.profile();
  return absl::OkStatus();
}

}  // namespace

bool IsDirectoryBuild(const ResolvedDecision& decision) {
  return decision.artifact_pinned() ? decision.shaped.resolution.pinned_artifact->files_size() > 0
                                    : decision.artifact->directory_build();
}

absl::Status CheckAgentTakesBuild(const ResolvedDecision& decision, bool accepts_directory_builds) {
  if (accepts_directory_builds || !IsDirectoryBuild(decision)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "accepts_directory_builds: the decision for model \"", *decision.model, "\" path \"",
      decision.path->name,
      "\" is a directory build (several files), and this agent did not say it accepts one; "
      "upgrade the agent (it keeps its last good build meanwhile)"));
}

void Summarize(const policy::Decision& decision, ResolveSummary* summary) {
  summary->hardware_class = decision.hardware_class;
  summary->path_name = decision.path->name;
  summary->effective_priority = decision.effective_priority;
}

absl::StatusOr<ResolvedDecision> Decide(const v1::ResolveWeightPathRequest& request,
                                        const Snapshot& snapshot, ResolveSummary* summary,
                                        const std::vector<v1::Rollout>& rollouts) {
  ASSIGN_OR_RETURN(const policy::HardwareClass hardware_class,
                   policy::ClassifyHardware(request.profile()));
  return Decide(request, hardware_class, snapshot, summary, rollouts);
}

absl::StatusOr<ResolvedDecision> Decide(const v1::ResolveWeightPathRequest& request,
                                        policy::HardwareClass hardware_class,
                                        const Snapshot& snapshot, ResolveSummary* summary,
                                        const std::vector<v1::Rollout>& rollouts,
                                        const deploy::ResolveIntervalSettings& intervals) {
  ResolvedDecision resolved;
  ASSIGN_OR_RETURN(resolved.shaped,
                   ResolveShaped(*snapshot.policy, hardware_class, request, rollouts, intervals));
  const policy::Decision& decision = resolved.shaped.resolution.decision;
  resolved.path = decision.path;
  Summarize(decision, summary);
  RETURN_IF_ERROR(AttachArtifact(request, *snapshot.catalog, &resolved));
  RETURN_IF_ERROR(CheckPinnedTarget(snapshot.catalog->trust(), *resolved.model,
                                    resolved.path->name, &resolved.shaped));
  return resolved;
}

absl::StatusOr<ResolvedDecision> DecideKnown(const policy::Decision& decision,
                                             const v1::ResolveWeightPathRequest& request,
                                             const Snapshot& snapshot, ResolveSummary* summary,
                                             const deploy::ResolveIntervalSettings& intervals) {
  static const std::vector<v1::Rollout> kNoRollouts;
  ResolvedDecision resolved;
  // As ResolveShaped with no rollouts: the policy's decision unshaped, and
  // the interval no rollout shortens.
  resolved.shaped.resolution.decision = decision;
  resolved.shaped.resolve_interval_seconds = deploy::SuggestedResolveIntervalSeconds(
      kNoRollouts, request.labels(), decision.hardware_class, intervals);
  resolved.shaped.failed_build_retry_seconds =
      static_cast<uint32_t>(absl::ToInt64Seconds(intervals.failed_build_retry));
  resolved.path = decision.path;
  Summarize(decision, summary);
  RETURN_IF_ERROR(AttachArtifact(request, *snapshot.catalog, &resolved));
  return resolved;
}

void FillDecidedPart(const ResolvedDecision& resolved, const Snapshot& snapshot,
                     v1::ResolveWeightPathResponse* decided) {
  const policy::Decision& decision = resolved.shaped.resolution.decision;
  const policy::PathDefinition& path = *resolved.path;
  decided->set_hardware_class(std::string(policy::HardwareClassName(decision.hardware_class)));
  v1::WeightPathSpec* spec = decided->mutable_weight_path();
  policy::FillWeightPathSpec(path, spec);
  spec->clear_verified();  // per call: fleet evidence may change it
  if (!resolved.artifact_pinned()) {
    FillArtifact(*resolved.artifact, decided->mutable_artifact());  // server/catalog.cc
  }
  if (resolved.per_device_engine_args() && resolved.profile != nullptr) {
    policy::FillEngineKwargs(path, *resolved.profile,
                             snapshot.catalog->FindModelFacts(*resolved.model),
                             decided->mutable_engine_kwargs());
  } else {
    policy::FillEngineKwargs(path, decided->mutable_engine_kwargs());
  }
  decided->set_effective_priority(decision.effective_priority);
  decided->set_policy_version(snapshot.policy->version());
  if (decision.rule != nullptr) decided->set_matched_rule(decision.rule->name);
  decided->set_model(*resolved.model);
}

void FillPerCallPart(const ResolvedDecision& resolved, v1::ResolveWeightPathResponse* per_call) {
  v1::WeightPathSpec* spec = per_call->mutable_weight_path();
  spec->set_verified(resolved.path->verified);
  v1::Verification* verification = spec->mutable_verification();
  if (resolved.path->verified) {
    verification->set_source(v1::Verification::SOURCE_POLICY);
    verification->set_reason("measured on hardware by the policy's authors");
  } else {
    verification->set_source(v1::Verification::SOURCE_NONE);
    verification->set_reason("not measured on this class of hardware yet");
  }
  ApplyShaping(resolved.shaped, per_call);
}

std::string ActedOnBytes(const v1::ResolveWeightPathResponse& decided) {
  v1::ResolveWeightPathResponse acted_on;
  acted_on.set_hardware_class(decided.hardware_class());
  const v1::WeightPathSpec& spec = decided.weight_path();
  v1::WeightPathSpec* build = acted_on.mutable_weight_path();
  build->set_name(spec.name());
  build->set_quantization(spec.quantization());
  if (spec.has_group_size()) build->set_group_size(spec.group_size());
  if (spec.has_bits_per_weight()) build->set_bits_per_weight(spec.bits_per_weight());
  build->set_fused_cpu_norms(spec.fused_cpu_norms());
  build->set_runs_in_vllm(spec.runs_in_vllm());
  build->set_build_with(spec.build_with());
  build->set_path_id(spec.path_id());
  if (decided.has_artifact()) *acted_on.mutable_artifact() = decided.artifact();
  if (decided.has_engine_kwargs()) *acted_on.mutable_engine_kwargs() = decided.engine_kwargs();
  acted_on.set_effective_priority(decided.effective_priority());
  acted_on.set_model(decided.model());
  return DeterministicBytes(acted_on);
}

std::string DecisionEtag(absl::string_view acted_on_bytes,
                         const v1::ResolveWeightPathResponse& per_call) {
  v1::ResolveWeightPathResponse shaping;
  if (per_call.has_rollout()) *shaping.mutable_rollout() = per_call.rollout();
  if (per_call.has_artifact()) *shaping.mutable_artifact() = per_call.artifact();
  // The lengths keep the two parts apart, so no two inputs hash alike.
  return Sha256Hex(absl::StrCat(acted_on_bytes.size(), ":", acted_on_bytes,
                                DeterministicBytes(shaping)))
      .substr(0, 32);
}

absl::Status Resolve(const v1::ResolveWeightPathRequest& request, const Snapshot& snapshot,
                     v1::ResolveWeightPathResponse* response, ResolveSummary* summary,
                     const std::vector<v1::Rollout>& rollouts, std::vector<std::string>* considered) {
  ASSIGN_OR_RETURN(ResolvedDecision resolved, Decide(request, snapshot, summary, rollouts));
  FillDecidedPart(resolved, snapshot, response);
  v1::ResolveWeightPathResponse per_call;
  FillPerCallPart(resolved, &per_call);
  per_call.set_decision_etag(DecisionEtag(ActedOnBytes(*response), per_call));
  response->MergeFrom(per_call);
  if (considered != nullptr) *considered = std::move(resolved.shaped.resolution.considered);
  return absl::OkStatus();
}

}  // namespace weightpath::server
