// The catalog from a TUF image repository: the server is a TUF client of
// its own --catalog directory. Each load fixes one start time, resumes from
// the trusted state it persisted (or the provisioned --catalog_root), runs
// the client workflow against the directory (trust/client.h RefreshMetadata:
// root chain, timestamp, snapshot, targets, every file bounded), persists
// the new trusted state, and only then builds the catalog from the verified
// targets: each target's `custom` (model, weight_path, version,
// hardware_classes) says which model and weight path it is the artifact
// of, its length and sha256 are the artifact's, and Artifact.target_path /
// signed_target are set. A repository that does not verify is refused with
// the file and the reason; the caller keeps the last good catalog.
//
//   --catalog DIR            weightpathctl repo's REPO (DIR/metadata is read)
//                            or a directory of metadata files (a mirror)
//   --catalog_root FILE      the trusted root.json the server starts from
//   --catalog_artifact_url   where the artifacts are: uri = URL/TARGET_PATH
//   --catalog_default_model  the model of a request that names none
//   --catalog_state_dir DIR  DIR/catalog-trust-state.json, so a restart
//                            cannot be rolled back to older metadata
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "policy/policy.h"
#include "server/config/catalog.h"
#include "trust/client.h"
#include "trust/metadata.h"
#include "trust/trusted_metadata_set.h"

namespace weightpath::server {

struct SignedCatalogOptions {
  std::string repository;         // --catalog
  std::string trusted_root_path;  // --catalog_root
  std::string state_dir;          // --catalog_state_dir
  std::string artifact_base_url;  // --catalog_artifact_url
  std::string default_model;      // --catalog_default_model; empty: the only model
};

inline constexpr char kCatalogTrustStateFile[] = "catalog-trust-state.json";
// The persisted state holds the exact bytes of each trusted file: the
// library's own limits for root, timestamp, snapshot and targets, plus a few
// delegated roles, fit well inside this.
inline constexpr size_t kMaxTrustStateBytes = 64 * 1024 * 1024;

// Whether `path` is a directory (a repository) rather than a YAML file.
bool IsCatalogRepository(const std::string& path);
// REPO/metadata when it exists (weightpathctl repo's layout), else REPO.
std::string CatalogMetadataDirectory(const std::string& repository);

// Reads metadata from `directory` as a device reads it from a mirror: files
// in `overlay` first, each at most request.max_bytes (RESOURCE_EXHAUSTED
// past it: the endless-data attack), NOT_FOUND when absent (ends the root
// chain), CANCELLED once `cancel` is set.
trust::MetadataFetcher DirectoryMetadataFetcher(std::string directory,
                                                const std::map<std::string, std::string>* overlay,
                                                const std::atomic<bool>* cancel);

class SignedCatalogSource {
 public:
  // Checks what can be checked before the first load: the root file is
  // there, the state directory exists or can be made (0700), the base URL
  // is http(s):// or file://.
  static absl::StatusOr<std::shared_ptr<SignedCatalogSource>> Create(SignedCatalogOptions options);

  const SignedCatalogOptions& options() const { return options_; }
  const std::string& metadata_dir() const { return metadata_dir_; }
  // Publishers write timestamp.json last: its change is the reload trigger.
  std::string watch_path() const { return metadata_dir_ + "/timestamp.json"; }
  std::string state_path() const;
  // REPO/.lock when --catalog is weightpathctl repo's layout, else empty.
  std::string lock_path() const;

  // Verifies the directory at `now`, persists the trusted state, and builds
  // the catalog against `policy` (every reachable path of every model).
  absl::StatusOr<std::shared_ptr<const Catalog>> Load(const policy::Policy& policy,
                                                      const std::atomic<bool>* cancel);

  // A client starting from the server's trusted state (nothing persisted)
  // refreshing against the directory with `overlay` in front: what the
  // timestamp signer checks before it publishes. Returns the refreshed set.
  absl::StatusOr<trust::TrustedMetadataSet> VerifyWithOverlay(
      const std::map<std::string, std::string>& overlay, absl::Time now);

  // The root the server trusts now (persisted state, else --catalog_root).
  absl::StatusOr<trust::Root> TrustedRoot(absl::Time now);

 private:
  explicit SignedCatalogSource(SignedCatalogOptions options);
  absl::StatusOr<trust::TrustedMetadataSet> StartSet(absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const SignedCatalogOptions options_;
  const std::string metadata_dir_;
  absl::Mutex mutex_;
  // What was last written to state_path() (or read from it).
  std::optional<std::string> state_ ABSL_GUARDED_BY(mutex_);
};

// The catalog from verified targets (exposed for tests): weightpath targets
// (those whose custom names a model) by model and weight path; a second
// target for the same model and weight path is refused naming both.
absl::StatusOr<std::shared_ptr<const Catalog>> BuildSignedCatalog(
    const std::vector<trust::TargetInfo>& targets, const trust::TrustedMetadataSet& set,
    const SignedCatalogOptions& options, const std::string& source_name,
    const policy::Policy& policy);

// Written to a temporary file beside `path`, flushed and renamed over it.
absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes, unsigned mode);

}  // namespace weightpath::server
