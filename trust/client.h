// The TUF client workflow over a TrustedMetadataSet, with the downloads
// left to the caller: a MetadataFetcher turns a MetadataRequest into bytes
// (an HTTP GET against the metadata base URL on a device, a file read in
// `weightpathctl repo verify`, a map in tests).
//
// And what weightpath needs of a verified target: its length and SHA-256,
// and the custom fields that say which model, weight path, version and
// hardware classes the artifact is for.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trust/build_manifest.h"
#include "trust/metadata.h"
#include "trust/trusted_metadata_set.h"

namespace weightpath::trust {

// The bytes of request.file_name, at most request.max_bytes of them (a
// fetcher stops reading past the limit and fails with RESOURCE_EXHAUSTED).
// NOT_FOUND when the file does not exist (HTTP 403 or 404): that is how the
// chain of newer roots ends.
using MetadataFetcher = std::function<absl::StatusOr<std::string>(const MetadataRequest&)>;

struct RefreshOptions {
  // Most root versions followed in one update (python-tuf's and tuf-js's
  // default), so a repository cannot keep a client fetching forever.
  int max_root_rotations = 256;
};

struct RefreshReport {
  int64_t root_version_before = 0;
  int64_t root_version = 0;
  bool timestamp_unchanged = false;
  std::vector<std::string> downloaded;  // file names, in order
};

// Workflow 5.3-5.6: the root chain, timestamp, snapshot and top-level
// targets, each from its persisted copy when that is still the current one.
absl::StatusOr<RefreshReport> RefreshMetadata(TrustedMetadataSet& set,
                                              const MetadataFetcher& fetch,
                                              const RefreshOptions& options = {});

// A target as the verified metadata describes it.
struct TargetInfo {
  std::string path;
  TargetFile file;
  std::string role;    // the targets role that lists it ("targets" or a delegated role)
  std::string sha256;  // file.hashes["sha256"], "" when the target has none
};

struct LookupOptions {
  int max_delegations = 32;  // most targets roles visited for one lookup
};

// Workflow 5.6.7: a preorder depth-first walk of the delegations, most
// trusted first; a role is consulted only for paths delegated to it, and a
// terminating delegation ends the walk. Delegated roles that are not
// trusted yet are loaded (persisted copy, else `fetch`; with no fetcher,
// FAILED_PRECONDITION naming the file). NOT_FOUND when no role lists it.
absl::StatusOr<TargetInfo> FindTarget(TrustedMetadataSet& set, absl::string_view target_path,
                                      const MetadataFetcher* fetch = nullptr,
                                      const LookupOptions& options = {});

// Every target some role lists and that FindTarget resolves to that role
// (a delegated role's entries outside its delegated paths are not
// trusted), in path order.
absl::StatusOr<std::vector<TargetInfo>> ListTargets(TrustedMetadataSet& set,
                                                    const MetadataFetcher* fetch = nullptr,
                                                    const LookupOptions& options = {});

// The `custom` object of a weightpath artifact:
//   {"model": "spark-x2.5-1.7b", "weight_path": "w4a8-amx",
//    "version": "2026.11.1", "hardware_classes": ["x86_cpu"]}
// and, for a directory build, "files": [{"path", "sha256", "size_bytes"}, ...]
// (trust/build_manifest.h): the target's length and sha256 are then its
// manifest's, and the files let a server list the build without fetching
// the manifest (it checks the digest matches before trusting the list).
// "canary": true marks a second build of a model's weight path that only a
// rollout's pin_artifact serves: the server's catalog keeps the unmarked
// target as the path's build for everyone else. Devices ignore the mark.
struct WeightpathTarget {
  std::string model;
  std::string weight_path;
  std::string version;
  std::vector<std::string> hardware_classes;
  std::vector<BuildManifestFile> files = {};  // empty for a single-file build
  bool canary = false;
};
// INVALID_ARGUMENT naming the target and the field.
absl::StatusOr<WeightpathTarget> ParseWeightpathTarget(const TargetInfo& target);
Json WeightpathTargetToJson(const WeightpathTarget& custom);

// Whether an artifact a decision names may be installed: the target lists
// exactly this length and SHA-256, is built for `hardware_class`, and is of
// the same shape (`directory_build`: the decision lists files, so the
// target's custom must list them too; a single file otherwise).
// PERMISSION_DENIED with the reason otherwise.
absl::Status CheckArtifactAgainstTarget(const TargetInfo& target, int64_t length,
                                        absl::string_view sha256,
                                        absl::string_view hardware_class,
                                        bool directory_build = false);

}  // namespace weightpath::trust
