// The ResolveWeightPath request the server benchmarks send: a profile file
// (examples/profiles/*.json) as an agent would send it, with a device id, the
// speed priority, a workload label and an agent version.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "policy/profile_json.h"
#include "server/config_watcher.h"
#include "server/resolve/resolver.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::bench {

inline absl::StatusOr<v1::ResolveWeightPathRequest> BenchResolveRequest(const std::string& profile_path) {
  std::ifstream in(profile_path);
  if (!in) return absl::NotFoundError(absl::StrCat(profile_path, ": cannot open"));
  std::stringstream json;
  json << in.rdbuf();
  absl::StatusOr<v1::HardwareProfile> profile = policy::ParseProfileJson(json.str(), profile_path);
  if (!profile.ok()) return profile.status();
  v1::ResolveWeightPathRequest request;
  request.set_device_id("bench-device-0001");
  *request.mutable_profile() = *std::move(profile);
  request.set_priority(v1::PRIORITY_SPEED);
  (*request.mutable_labels())["workload"] = "agentic";
  request.set_agent_version("bench");
  return request;
}

// For a bench tool's main(): the request, or the reason on stderr and exit 1.
inline v1::ResolveWeightPathRequest BenchResolveRequestOrExit(const std::string& profile_path) {
  absl::StatusOr<v1::ResolveWeightPathRequest> request = BenchResolveRequest(profile_path);
  if (!request.ok()) {
    std::fprintf(stderr, "cannot read the profile: %s\n", request.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(request);
}

// What the server on its embedded defaults (bundled policy, demo catalog,
// no rollouts) answers to `request`, decided in-process.
inline absl::StatusOr<v1::ResolveWeightPathResponse> EmbeddedDefaultsDecision(
    const v1::ResolveWeightPathRequest& request) {
  absl::StatusOr<std::shared_ptr<const server::Snapshot>> snapshot = server::LoadSnapshot({});
  if (!snapshot.ok()) return snapshot.status();
  v1::ResolveWeightPathResponse response;
  server::ResolveSummary summary;
  absl::Status resolved = server::Resolve(request, **snapshot, &response, &summary);
  if (!resolved.ok()) return resolved;
  return response;
}

}  // namespace weightpath::bench
