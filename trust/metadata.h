// TUF 1.0 metadata documents (root, timestamp, snapshot, targets) as typed
// values: parsed and validated from the bytes a repository serves, and
// written back for the tools that make a repository.
//
// Parsing checks form, not trust: every field a role needs is present and of
// the right type and range, "_type" is the role the caller expected (a
// snapshot served as targets.json is refused here), key ids are what the key
// hashes to. Whether the signatures reach a threshold, versions move forward
// and nothing has expired is the TrustedMetadataSet's job.
//
// Fields this reader does not know are kept (TUF asks implementations to
// preserve them), so metadata from other tools can be re-signed unchanged.
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
#include "trust/json.h"

namespace weightpath::trust {

// The spec version this library writes; it reads any 1.x.y (as python-tuf
// and tuf-js do, a minor version only adds to the format).
inline constexpr absl::string_view kSpecVersion = "1.0.31";

enum class RoleType { kRoot, kTimestamp, kSnapshot, kTargets };
absl::string_view RoleTypeName(RoleType type);  // "root", ...
bool IsTopLevelRoleName(absl::string_view name);

struct Key {
  std::string keyid;  // lowercase hex SHA-256 of the canonical key object
  std::string keytype;
  std::string scheme;
  std::string public_value;  // keyval.public
  Json json;                 // the key object as listed, extra fields included
  // Set for keytype and scheme "ed25519" with a 64-digit hex value; other
  // keys are kept (a root may list them) but no signature of theirs counts.
  std::optional<Ed25519PublicKey> ed25519;
};

// The key object this library writes: {"keytype": "ed25519", "scheme":
// "ed25519", "keyval": {"public": HEX}}, with its key id.
Key MakeEd25519Key(const Ed25519PublicKey& public_key);
// SHA-256 of the canonical form of a key object, in hex.
std::string ComputeKeyId(const Json& key_json);

struct RoleKeys {
  std::vector<std::string> keyids;
  int64_t threshold = 1;
  Json::Object unrecognized;
};

// A snapshot or timestamp entry describing another metadata file.
struct MetaFile {
  int64_t version = 1;
  std::optional<int64_t> length;
  std::map<std::string, std::string> hashes;  // algorithm -> lowercase hex
  Json::Object unrecognized;
};

struct SignedCommon {
  std::string spec_version{kSpecVersion};
  int64_t version = 1;
  absl::Time expires = absl::InfinitePast();
  Json::Object unrecognized;
};

struct Root : SignedCommon {
  bool consistent_snapshot = true;
  std::map<std::string, Key> keys;       // by key id
  std::map<std::string, RoleKeys> roles;  // exactly root, timestamp, snapshot, targets
};

struct Timestamp : SignedCommon {
  MetaFile snapshot_meta;  // meta["snapshot.json"]
};

struct Snapshot : SignedCommon {
  std::map<std::string, MetaFile> meta;  // "targets.json", "ROLE.json"
};

struct TargetFile {
  int64_t length = 0;
  std::map<std::string, std::string> hashes;
  Json custom;  // null when absent
  Json::Object unrecognized;
};

struct DelegatedRole {
  std::string name;
  std::vector<std::string> keyids;
  int64_t threshold = 1;
  bool terminating = false;
  // Exactly one of the two is set.
  std::optional<std::vector<std::string>> paths;
  std::optional<std::vector<std::string>> path_hash_prefixes;
  Json::Object unrecognized;

  // Whether this role is trusted for `target_path`: a `paths` pattern
  // matches component by component ("/" separated, the same number of
  // components, each matched like fnmatch: *, ?, [set], [!set]), or the
  // hex SHA-256 of the path starts with a prefix.
  bool IsDelegatedPath(absl::string_view target_path) const;
};

struct Delegations {
  std::map<std::string, Key> keys;
  std::vector<DelegatedRole> roles;  // in order: earlier roles are more trusted
  Json::Object unrecognized;
};

struct Targets : SignedCommon {
  std::map<std::string, TargetFile, std::less<>> targets;  // by target path
  std::optional<Delegations> delegations;
};

struct Signature {
  std::string keyid;
  std::string sig;  // lowercase hex
  Json::Object unrecognized;
};

// One parsed metadata document.
template <typename T>
struct Metadata {
  T signed_part;
  std::vector<Signature> signatures;
  // The bytes the signatures cover: the canonical JSON of "signed".
  std::string canonical_signed;
  Json::Object unrecognized;  // top-level fields besides signed/signatures
};

// `label` names the file in every error ("3.root.json", "timestamp.json").
absl::StatusOr<Metadata<Root>> ParseRoot(absl::string_view bytes, absl::string_view label);
absl::StatusOr<Metadata<Timestamp>> ParseTimestamp(absl::string_view bytes, absl::string_view label);
absl::StatusOr<Metadata<Snapshot>> ParseSnapshot(absl::string_view bytes, absl::string_view label);
absl::StatusOr<Metadata<Targets>> ParseTargets(absl::string_view bytes, absl::string_view label);

// The "signed" object of each role, as written to a file and signed.
Json SignedToJson(const Root& root);
Json SignedToJson(const Timestamp& timestamp);
Json SignedToJson(const Snapshot& snapshot);
Json SignedToJson(const Targets& targets);
Json TargetFileToJson(const TargetFile& target);

// A whole metadata file: {"signatures": [...], "signed": ...} as PrettyJson.
std::string EncodeMetadataFile(const Json& signed_json, const std::vector<Signature>& signatures,
                               const Json::Object& unrecognized = {});

// Appends (or replaces) the signature of `key` over `canonical_signed`.
absl::Status AddSignature(const Ed25519PrivateKey& key, absl::string_view canonical_signed,
                          std::vector<Signature>& signatures);

// "2030-01-01T00:00:00Z": the only form TUF allows. INVALID_ARGUMENT for
// anything else (fractions of a second, offsets, out-of-range fields).
absl::StatusOr<absl::Time> ParseExpires(absl::string_view text);
std::string FormatExpires(absl::Time time);  // truncated to the second

// How many of a role's keys signed `canonical_signed` validly. Each key id
// counts once, and two key ids of one public key count once, so a root that
// lists a key twice cannot turn one signature into two.
struct SignatureTally {
  int64_t valid = 0;
  int64_t threshold = 0;
  std::vector<std::string> valid_keyids;
  std::vector<std::string> invalid_keyids;      // signature present, does not verify
  std::vector<std::string> unsupported_keyids;  // listed key is not ed25519
  std::vector<std::string> unsigned_keyids;     // role key with no signature
};
SignatureTally TallySignatures(absl::string_view canonical_signed,
                               const std::vector<Signature>& signatures,
                               const std::map<std::string, Key>& keys,
                               const std::vector<std::string>& role_keyids, int64_t threshold);

// OK when the tally reaches the threshold; otherwise UNAUTHENTICATED like
// "targets.json: 1 of the 2 signatures required from the targets keys of
// root v4 (below threshold); valid: 1a2b3c4d; bad: 5e6f7a8b; missing: ...".
absl::Status CheckThreshold(absl::string_view label, absl::string_view signer_description,
                            const SignatureTally& tally);

// The 8-digit form of a key id used in messages (never a secret, just short).
std::string ShortKeyId(absl::string_view keyid);

}  // namespace weightpath::trust
