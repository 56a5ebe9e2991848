// The client's trusted view of a TUF repository, and the only way metadata
// becomes trusted: the update steps of the TUF 1.0 client workflow (section
// 5) as a state machine over bytes the caller downloaded.
//
// It reads no file, opens no socket and reads no clock. The caller passes
// the reference time once (the workflow fixes it at the start of an update,
// so a slow download cannot make metadata expire halfway through) and the
// bytes of each file; MetadataRequest says which file to fetch and how many
// bytes at most.
//
// Order of calls, as the workflow prescribes (RefreshMetadata in client.h
// does all of it given a fetcher):
//   Create(initial root) or Restore(SerializeTrusted() of an earlier run)
//   UpdateRoot(N+1.root.json) ... until the repository has no newer root
//   UpdateTimestamp(timestamp.json)
//   LoadPersistedSnapshot() or UpdateSnapshot(snapshot)
//   LoadPersistedTargets("targets", "root") or UpdateTargets(targets)
//   delegated roles, on demand (FindTarget in client.h)
// Each step refuses, with the file, the field and the reason, anything the
// workflow refuses: a signature threshold not met, a version that goes
// back, a snapshot that is not the one the timestamp names, metadata that
// has expired, a file larger than its limit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trust/metadata.h"

namespace weightpath::trust {

// Most bytes accepted for each metadata file (the endless-data attack: a
// mirror that never stops sending). The defaults are python-tuf's and
// tuf-js's. A timestamp or snapshot entry that gives a length narrows the
// limit to exactly that length.
struct MetadataLimits {
  int64_t root_max_bytes = 512'000;
  int64_t timestamp_max_bytes = 16'384;
  int64_t snapshot_max_bytes = 2'000'000;
  int64_t targets_max_bytes = 5'000'000;  // top-level targets and each delegated role
};

// One file to download, relative to the repository's metadata base URL.
struct MetadataRequest {
  std::string role;       // "root", "timestamp", "snapshot", "targets" or a delegated role
  std::string file_name;  // "4.root.json", "timestamp.json", "7.snapshot.json", "ml%2Fteam.json"
  int64_t max_bytes = 0;  // stop and fail past this many bytes
};

// The file name of a role's metadata: "VERSION.ROLE.json" under consistent
// snapshots (root always), "ROLE.json" otherwise; timestamp is always
// "timestamp.json". Delegated role names are percent-encoded (everything
// but ALPHA, DIGIT, "-", ".", "_", "~"), as python-tuf and tuf-js do.
std::string MetadataFileName(absl::string_view role, std::optional<int64_t> version);
std::string PercentEncodeRoleName(absl::string_view role);

// Where a state given to Restore comes from.
enum class PersistedState {
  // Anything: every signature and hash is checked again.
  kVerifyAgain,
  // Exactly the bytes SerializeTrusted wrote after an update that succeeded
  // (the caller's evidence, e.g. a stamp of the file's identity): the root,
  // timestamp, snapshot and top-level targets in it were each verified
  // against that root, so their signatures and hashes are not checked
  // again. Everything else is: expiry against the new reference time,
  // versions, the timestamp naming the snapshot and the snapshot the
  // targets, lengths. Delegated roles, and anything once a newer root is
  // trusted, are verified as for kVerifyAgain.
  kVerifiedWhenWritten,
};

enum class TimestampUpdate {
  kUpdated,    // a newer timestamp is now trusted
  kUnchanged,  // the same version as the trusted one: nothing changed upstream
};

class TrustedMetadataSet {
 public:
  // Trusts `root_bytes` as the initial root (provisioned with the device):
  // it must be signed by a threshold of its own root keys. An expired root
  // is accepted here; expiry is checked once the chain of newer roots has
  // been followed (workflow 5.3.10).
  static absl::StatusOr<TrustedMetadataSet> Create(absl::string_view root_bytes,
                                                   absl::Time reference_time,
                                                   const MetadataLimits& limits = {});

  // From SerializeTrusted() of an earlier update. The root is verified
  // again; the timestamp, snapshot and targets are kept as persisted copies
  // (rollback references and a cache) and are verified when first used.
  static absl::StatusOr<TrustedMetadataSet> Restore(
      absl::string_view state, absl::Time reference_time, const MetadataLimits& limits = {},
      PersistedState provenance = PersistedState::kVerifyAgain);

  // Root N+1: signed by a threshold of root N's root keys AND of its own,
  // version exactly N+1. FAILED_PRECONDITION once a timestamp was loaded.
  // When the timestamp or snapshot role's keys or threshold change, the
  // persisted timestamp and snapshot are dropped (workflow 5.3.11): after a
  // compromise they may carry versions an attacker pushed far ahead, and
  // keeping them would lock the device out of the recovered repository.
  absl::Status UpdateRoot(absl::string_view bytes);

  // Checks the final root has not expired, then timestamp.json: signed by a
  // threshold of the timestamp keys, version and snapshot version not below
  // the trusted ones, not expired. An expired timestamp with a new version
  // is kept as the rollback reference, and the error is returned. Bytes
  // identical to the trusted timestamp, verified under the same root, are
  // not verified twice (the answer could not differ); expiry still is.
  absl::StatusOr<TimestampUpdate> UpdateTimestamp(absl::string_view bytes);

  // The snapshot the trusted timestamp names: length and hashes as the
  // timestamp lists them, signed by the snapshot keys, no role's version
  // below the trusted snapshot's, version equal to the timestamp's entry,
  // not expired.
  absl::Status UpdateSnapshot(absl::string_view bytes);

  // Top-level targets (delegated by root) or a delegated role (delegated by
  // `delegator`, a trusted targets role): length and hashes as the snapshot
  // lists them, signed by a threshold of the delegator's keys for the role,
  // version equal to the snapshot's entry, not expired.
  absl::Status UpdateTargets(absl::string_view bytes) {
    return UpdateDelegatedTargets(bytes, "targets", "root");
  }
  absl::Status UpdateDelegatedTargets(absl::string_view bytes, absl::string_view role,
                                      absl::string_view delegator) {
    return ApplyTargets(bytes, role, delegator, /*persisted=*/false);
  }

  // The persisted copies from Restore, verified like fresh downloads (the
  // snapshot skips only the timestamp's hashes, which name the file on the
  // mirror). OK when the copy is trusted and final, so no download is
  // needed; otherwise the reason (NOT_FOUND when there is no copy, or the
  // copy is an older version than the trusted metadata now names, as after
  // any update), and the caller downloads. A persisted timestamp is loaded by UpdateTimestamp
  // itself, so rollback protection cannot be skipped by not asking for it.
  absl::Status LoadPersistedTimestamp();
  absl::Status LoadPersistedSnapshot();
  absl::Status LoadPersistedTargets(absl::string_view role, absl::string_view delegator);

  // What to download next, with the byte limit.
  MetadataRequest NextRootRequest() const;
  MetadataRequest TimestampRequest() const;
  absl::StatusOr<MetadataRequest> SnapshotRequest() const;                   // needs a timestamp
  absl::StatusOr<MetadataRequest> TargetsRequest(absl::string_view role) const;  // needs a snapshot

  // Every trusted file's exact bytes (and persisted copies not yet
  // superseded) as one JSON document for Restore; write it atomically.
  std::string SerializeTrusted() const;

  const Metadata<Root>& root() const { return root_.metadata; }
  const Metadata<Timestamp>* timestamp() const;
  const Metadata<Snapshot>* snapshot() const;
  // A trusted targets role ("targets" or a delegated role), or nullptr.
  const Metadata<Targets>* targets(absl::string_view role = "targets") const;
  absl::Time reference_time() const { return reference_time_; }
  const MetadataLimits& limits() const { return limits_; }
  // Persisted copies that were dropped, and why (for the caller's log).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  template <typename T>
  struct Trusted {
    Metadata<T> metadata;
    std::string bytes;
  };

  TrustedMetadataSet(Trusted<Root> root, absl::Time reference_time, const MetadataLimits& limits)
      : root_(std::move(root)), reference_time_(reference_time), limits_(limits) {}

  static absl::StatusOr<TrustedMetadataSet> FromRoot(absl::string_view root_bytes,
                                                     absl::Time reference_time,
                                                     const MetadataLimits& limits,
                                                     bool verify_signatures);
  // Whether a persisted copy's signatures and hashes were verified when it
  // was written (PersistedState::kVerifiedWhenWritten, same root).
  bool VerifiedWhenWritten(bool persisted) const;
  absl::Status ApplyTargets(absl::string_view bytes, absl::string_view role,
                            absl::string_view delegator, bool persisted);
  absl::Status FinishRootChain();
  absl::Status CheckFinalTimestamp() const;
  absl::Status CheckFinalSnapshot() const;
  absl::StatusOr<TimestampUpdate> ApplyTimestamp(absl::string_view bytes, bool persisted);
  absl::Status ApplySnapshot(absl::string_view bytes, bool persisted);
  std::string TimestampLabel() const;
  std::string SnapshotLabel() const;

  Trusted<Root> root_;
  absl::Time reference_time_;
  MetadataLimits limits_;
  std::optional<Trusted<Timestamp>> timestamp_;
  std::optional<Trusted<Snapshot>> snapshot_;
  std::map<std::string, Trusted<Targets>, std::less<>> targets_;

  // Persisted copies from Restore that were not used (yet).
  std::optional<std::string> persisted_timestamp_;
  std::optional<std::string> persisted_snapshot_;
  std::map<std::string, std::string, std::less<>> persisted_targets_;

  // The root version under which timestamp_ was verified.
  int64_t timestamp_root_version_ = 0;
  // Set by Restore with kVerifiedWhenWritten: the restored root's version.
  std::optional<int64_t> verified_when_written_root_;

  bool root_chain_finished_ = false;
  bool persisted_timestamp_tried_ = false;
  std::vector<std::string> notes_;
};

}  // namespace weightpath::trust
