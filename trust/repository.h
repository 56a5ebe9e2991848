// Making TUF metadata: the signing side, for the tools that run a
// repository (`weightpathctl repo`) and for a service that keeps a
// timestamp fresh with an online key. Bytes and keys in, bytes out; where
// the files live is the caller's business.
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
#include "trust/crypto.h"
#include "trust/metadata.h"

namespace weightpath::trust {

// A private key and the TUF key object of its public half.
struct SigningKey {
  std::string source;  // where it came from, for messages ("keys/targets.pem")
  Ed25519PrivateKey private_key;
  Key key;
};
SigningKey MakeSigningKey(std::string source, Ed25519PrivateKey private_key);

// What a snapshot or timestamp records of a metadata file it lists:
// version, length and SHA-256, so a client can check the exact bytes.
MetaFile DescribeMetadataFile(absl::string_view bytes, int64_t version);

// Refuses what no client should be handed: metadata that has already
// expired at `now`, or a version that is not above the published one (a
// client that saw the published version would take it as a rollback).
// FAILED_PRECONDITION naming `label`.
absl::Status CheckPublishable(absl::string_view label, const SignedCommon& next,
                              std::optional<int64_t> published_version, absl::Time now);

// Signs the canonical form of `signed_json` with each key (replacing an
// earlier signature by the same key) and returns the file's bytes.
absl::StatusOr<std::string> SignMetadata(const Json& signed_json,
                                         const std::vector<const SigningKey*>& keys,
                                         std::vector<Signature> signatures = {});

// The keys of `role` in `root` among `keys`; INVALID_ARGUMENT naming the
// first key that is not one of them (signing with a stranger's key would
// only produce a signature every client ignores).
absl::StatusOr<std::vector<const SigningKey*>> KeysForRole(const Root& root, absl::string_view role,
                                                           const std::vector<SigningKey>& keys);

struct NewRepositoryOptions {
  absl::Time now;
  absl::Duration root_lifetime = absl::Hours(24 * 365);
  absl::Duration targets_lifetime = absl::Hours(24 * 90);
  absl::Duration snapshot_lifetime = absl::Hours(24 * 7);
  absl::Duration timestamp_lifetime = absl::Hours(24);
  int64_t root_threshold = 1;
  int64_t targets_threshold = 1;
  bool consistent_snapshot = true;
};

// The public keys of each top-level role and the private keys that sign
// version 1 (enough of them for each threshold).
struct NewRepositoryKeys {
  std::vector<Key> root, targets, snapshot, timestamp;
  std::vector<SigningKey> signers;
};

// Version 1 of each top-level role, signed: empty targets, a snapshot that
// lists them, a timestamp that lists the snapshot. Keyed by role.
struct RepositoryFiles {
  std::string root, targets, snapshot, timestamp;
};
absl::StatusOr<RepositoryFiles> CreateRepository(const NewRepositoryKeys& keys,
                                                 const NewRepositoryOptions& options);

// A timestamp naming `snapshot_bytes` (of snapshot version
// `snapshot_version`), one version above `previous_version`, signed.
absl::StatusOr<std::string> MakeTimestamp(absl::string_view snapshot_bytes, int64_t snapshot_version,
                                          int64_t previous_version, absl::Time expires,
                                          const std::vector<const SigningKey*>& keys);

}  // namespace weightpath::trust
