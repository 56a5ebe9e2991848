// Turns a validated request and one snapshot into a response. Independent of
// gRPC so fleet recording, verification evidence, rollouts and
// ExplainDecision can wrap or reuse it.
//
// A response is built in two parts. The decided part (class, path, artifact,
// engine kwargs, versions) depends only on the decision and the snapshot, so
// the server encodes it once per decision (server/response_cache.h). The
// per-call part carries what can differ between two devices given the same
// decision: `verified` and its evidence, the rollout attribution, a pinned
// artifact and the resolve interval. The response is the decided part
// merged with the per-call part (protobuf merge: set fields of the second
// win, sub-messages merge); server/resolve_wire.h writes that merged
// message's encoding without building it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "deploy/resolve_interval.h"
#include "policy/engine_args.h"
#include "policy/hardware_class.h"
#include "server/config/catalog.h"
#include "server/config/policy_snapshot.h"
#include "server/resolve/rollout_resolve.h"
#include "weightpath/v1/rollout.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

// What the metrics need to know about a call, filled as far as resolving got
// (an unknown model still has a hardware class and a path).
struct ResolveSummary {
  std::optional<policy::HardwareClass> hardware_class;
  absl::string_view path_name;  // owned by the snapshot's policy
  v1::Priority effective_priority = v1::PRIORITY_UNSPECIFIED;
  bool unchanged = false;  // answered "unchanged" to the device's known etag
};

// One device's decision against one snapshot; pointers into the snapshot.
struct ResolvedDecision {
  ShapedResolve shaped;
  const policy::PathDefinition* path = nullptr;
  const std::string* model = nullptr;  // the request's, or the catalog default
  const CatalogArtifact* artifact = nullptr;
  // The request's: what a path's engine_args read, with the catalog's
  // model_facts for `model`.
  const v1::HardwareProfile* profile = nullptr;

  bool artifact_pinned() const { return shaped.resolution.pinned_artifact.has_value(); }
  // The decided part depends on the device's profile, not only on the
  // decision (policy::DerivesEngineArgs): it is built per call.
  bool per_device_engine_args() const {
    return path != nullptr && policy::DerivesEngineArgs(*path);
  }
};

// NOT_FOUND naming the known models when `request.model` is not in the
// catalog; INVALID_ARGUMENT when the profile cannot be classified.
// `rollouts` (the in-memory cache's) may shape the decision
// (deploy::ResolveWithRollouts). `request` and `snapshot` must outlive the
// result.
absl::StatusOr<ResolvedDecision> Decide(const v1::ResolveWeightPathRequest& request,
                                        const Snapshot& snapshot, ResolveSummary* summary,
                                        const std::vector<v1::Rollout>& rollouts = {});
// The same for a validated request whose profile's class is known
// (ValidateAndClassifyResolveRequest): nothing classifies it again.
// `intervals`: what the server tells devices about when to resolve again
// (--resolve_interval, --rollout_resolve_interval).
absl::StatusOr<ResolvedDecision> Decide(const v1::ResolveWeightPathRequest& request,
                                        policy::HardwareClass hardware_class,
                                        const Snapshot& snapshot, ResolveSummary* summary,
                                        const std::vector<v1::Rollout>& rollouts,
                                        const deploy::ResolveIntervalSettings& intervals = {});

// Decide for a call that no rollout shapes, given the policy's decision for
// its profile and priority (policy::Evaluate, as ProfileMemo keeps it): the
// same result Decide gives with no rollouts. `decision` must belong to
// `snapshot`'s policy.
absl::StatusOr<ResolvedDecision> DecideKnown(const policy::Decision& decision,
                                             const v1::ResolveWeightPathRequest& request,
                                             const Snapshot& snapshot, ResolveSummary* summary,
                                             const deploy::ResolveIntervalSettings& intervals = {});

// Whether the requesting agent can take the decision's build (the pinned
// one when a rollout pinned one): a directory build to an agent that did
// not say accepts_directory_builds is FAILED_PRECONDITION naming the field,
// so an older agent keeps its last good build instead of handing its
// engine something it cannot load. A flag test, no more, on every call.
bool IsDirectoryBuild(const ResolvedDecision& decision);
absl::Status CheckAgentTakesBuild(const ResolvedDecision& decision, bool accepts_directory_builds);

// What Decide puts in the summary for `decision` (the policy's, as shaped).
void Summarize(const policy::Decision& decision, ResolveSummary* summary);

// Everything but the per-call fields; `verified` stays unset and the
// artifact is left out when a rollout pinned one. Engine kwargs: the path's
// quantization, then what its engine_args derive from the decision's
// profile and model facts.
void FillDecidedPart(const ResolvedDecision& decision, const Snapshot& snapshot,
                     v1::ResolveWeightPathResponse* decided);
// `verified` as the policy states it, the rollout attribution, a pinned
// artifact and the resolve interval. decision_etag is the caller's to set,
// once the per-call part is final.
void FillPerCallPart(const ResolvedDecision& decision, v1::ResolveWeightPathResponse* per_call);

// What the decided part says that a device acts on (hardware class, the
// spec's build fields, artifact, engine kwargs, effective priority, model),
// as stable bytes: equal on every replica and every call for the same
// decision. Rationale, notes, expected figures, versions and the matched
// rule are left out: a device does nothing different when only they change.
std::string ActedOnBytes(const v1::ResolveWeightPathResponse& decided);

// decision_etag: a hash of ActedOnBytes(decided) and of what the per-call
// part changes of it (rollout attribution, a pinned artifact). 32 hex digits.
std::string DecisionEtag(absl::string_view acted_on_bytes,
                         const v1::ResolveWeightPathResponse& per_call);

// The whole response in one message: Decide, then both parts merged. When
// given, `considered` receives why each rollout did or did not apply
// (ExplainDecision). The response carries its decision_etag.
absl::Status Resolve(const v1::ResolveWeightPathRequest& request, const Snapshot& snapshot,
                     v1::ResolveWeightPathResponse* response, ResolveSummary* summary,
                     const std::vector<v1::Rollout>& rollouts = {},
                     std::vector<std::string>* considered = nullptr);

}  // namespace weightpath::server
