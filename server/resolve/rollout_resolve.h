// What rollouts change in one resolve: the decision the policy gives once
// the first applicable member rollout has shaped it, its attribution, a
// pinned artifact, and how soon the device should ask again.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deploy/resolve_interval.h"
#include "deploy/rollout_shaping.h"
#include "policy/policy.h"
#include "server/config/catalog.h"
#include "weightpath/v1/rollout.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

struct ShapedResolve {
  deploy::RolloutResolution resolution;
  uint32_t resolve_interval_seconds = 0;
  uint32_t failed_build_retry_seconds = 0;  // the settings', whatever shaped it
};

// `hardware_class` is the request profile's (policy::ClassifyHardware, as
// request validation computed it).
absl::StatusOr<ShapedResolve> ResolveShaped(const policy::Policy& policy,
                                            policy::HardwareClass hardware_class,
                                            const v1::ResolveWeightPathRequest& request,
                                            const std::vector<v1::Rollout>& rollouts,
                                            const deploy::ResolveIntervalSettings& settings = {});

// Fills `rollout` and `resolve_interval_seconds`, and replaces the catalog's
// artifact when a rollout pinned one.
void ApplyShaping(const ShapedResolve& shaped, v1::ResolveWeightPathResponse* response);

// A rollout's pin_artifact, made what the device is sent. Two forms:
//  - named by target_path alone (no uri, no files): a build of the signed
//    catalog, canaries included (custom.canary, server/config/catalog.h),
//    sent as the catalog would send it (uri, sha256, size, version, files,
//    signed_target true). FAILED_PRECONDITION naming the rollout when the
//    catalog is not signed, lists no weightpath target of that path, or
//    lists one of another model than `model` or another weight path than
//    the decision's `path_name`, or of another sha256 than a pin that
//    gives one: the device keeps its last good build rather than be sent
//    the wrong one.
//  - uri and sha256 given: the operator's word, not a signature: its
//    signed_target is set true only when its target_path names a target
//    the catalog's verified metadata lists with exactly its size_bytes and
//    sha256, and false otherwise (whatever the rollout said).
absl::Status CheckPinnedTarget(const CatalogTrust& trust, absl::string_view model,
                               absl::string_view path_name, ShapedResolve* shaped);

}  // namespace weightpath::server
