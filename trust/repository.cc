#include "trust/repository.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace weightpath::trust {

SigningKey MakeSigningKey(std::string source, Ed25519PrivateKey private_key) {
  Key key = MakeEd25519Key(private_key.public_key());
  return SigningKey{std::move(source), std::move(private_key), std::move(key)};
}

MetaFile DescribeMetadataFile(absl::string_view bytes, int64_t version) {
  MetaFile meta;
  meta.version = version;
  meta.length = static_cast<int64_t>(bytes.size());
  meta.hashes.emplace("sha256", Sha256Hex(bytes));
  return meta;
}

absl::Status CheckPublishable(absl::string_view label, const SignedCommon& next,
                              std::optional<int64_t> published_version, absl::Time now) {
  if (next.expires <= now) {
    return absl::FailedPreconditionError(
        absl::StrCat(label, ": refusing to sign metadata that expires at ",
                     FormatExpires(next.expires), ", which is not in the future"));
  }
  if (published_version && next.version <= *published_version) {
    return absl::FailedPreconditionError(absl::StrCat(
        label, ": refusing to sign version ", next.version, ", not above the published ",
        *published_version, " (clients would refuse it as a rollback)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SignMetadata(const Json& signed_json,
                                         const std::vector<const SigningKey*>& keys,
                                         std::vector<Signature> signatures) {
  const std::string canonical = CanonicalJson(signed_json);
  for (const SigningKey* key : keys) {
    RETURN_IF_ERROR(AddSignature(key->private_key, canonical, signatures));
  }
  return EncodeMetadataFile(signed_json, signatures);
}

absl::StatusOr<std::vector<const SigningKey*>> KeysForRole(const Root& root, absl::string_view role,
                                                           const std::vector<SigningKey>& keys) {
  auto it = root.roles.find(std::string(role));
  if (it == root.roles.end()) {
    return absl::InvalidArgumentError(absl::StrCat("root has no role ", role));
  }
  const std::set<std::string> allowed(it->second.keyids.begin(), it->second.keyids.end());
  std::vector<const SigningKey*> selected;
  for (const SigningKey& key : keys) {
    if (allowed.count(key.key.keyid) == 0) {
      std::vector<std::string> short_ids;
      for (const std::string& keyid : it->second.keyids) short_ids.push_back(ShortKeyId(keyid));
      return absl::InvalidArgumentError(absl::StrCat(
          key.source, ": key ", ShortKeyId(key.key.keyid), " is not a ", role, " key of root v",
          root.version, " (its ", role, " keys: ", absl::StrJoin(short_ids, ", "), ")"));
    }
    selected.push_back(&key);
  }
  return selected;
}

namespace {

RoleKeys RoleOf(const std::vector<Key>& keys, int64_t threshold) {
  RoleKeys role;
  for (const Key& key : keys) role.keyids.push_back(key.keyid);
  role.threshold = threshold;
  return role;
}

absl::Status CheckRoleKeys(absl::string_view role, const std::vector<Key>& keys, int64_t threshold) {
  if (keys.empty()) return absl::InvalidArgumentError(absl::StrCat(role, ": no keys given"));
  std::set<std::string> distinct;
  for (const Key& key : keys) {
    if (!distinct.insert(key.keyid).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(role, ": key ", ShortKeyId(key.keyid), " is given twice"));
    }
  }
  if (threshold < 1 || threshold > static_cast<int64_t>(keys.size())) {
    return absl::InvalidArgumentError(absl::StrCat(role, ": threshold ", threshold,
                                                   " must be between 1 and the ", keys.size(),
                                                   " keys given"));
  }
  return absl::OkStatus();
}

// The signers among `keys` whose key ids the role lists; INVALID_ARGUMENT
// when they cannot reach its threshold.
absl::StatusOr<std::vector<const SigningKey*>> SignersFor(absl::string_view role,
                                                          const RoleKeys& role_keys,
                                                          const std::vector<SigningKey>& signers) {
  std::vector<const SigningKey*> selected;
  for (const SigningKey& signer : signers) {
    for (const std::string& keyid : role_keys.keyids) {
      if (signer.key.keyid == keyid) {
        selected.push_back(&signer);
        break;
      }
    }
  }
  if (static_cast<int64_t>(selected.size()) < role_keys.threshold) {
    return absl::InvalidArgumentError(absl::StrCat(role, ": ", selected.size(),
                                                   " private keys given, the threshold is ",
                                                   role_keys.threshold));
  }
  return selected;
}

}  // namespace

absl::StatusOr<RepositoryFiles> CreateRepository(const NewRepositoryKeys& keys,
                                                 const NewRepositoryOptions& options) {
  RETURN_IF_ERROR(CheckRoleKeys("root", keys.root, options.root_threshold));
  RETURN_IF_ERROR(CheckRoleKeys("targets", keys.targets, options.targets_threshold));
  RETURN_IF_ERROR(CheckRoleKeys("snapshot", keys.snapshot, 1));
  RETURN_IF_ERROR(CheckRoleKeys("timestamp", keys.timestamp, 1));

  Root root;
  root.version = 1;
  root.expires = options.now + options.root_lifetime;
  root.consistent_snapshot = options.consistent_snapshot;
  for (const std::vector<Key>* role_keys : {&keys.root, &keys.targets, &keys.snapshot, &keys.timestamp}) {
    for (const Key& key : *role_keys) root.keys.emplace(key.keyid, key);
  }
  root.roles.emplace("root", RoleOf(keys.root, options.root_threshold));
  root.roles.emplace("targets", RoleOf(keys.targets, options.targets_threshold));
  root.roles.emplace("snapshot", RoleOf(keys.snapshot, 1));
  root.roles.emplace("timestamp", RoleOf(keys.timestamp, 1));

  Targets targets;
  targets.version = 1;
  targets.expires = options.now + options.targets_lifetime;

  RepositoryFiles files;
  ASSIGN_OR_RETURN(std::vector<const SigningKey*> root_signers,
                   SignersFor("root", root.roles["root"], keys.signers));
  ASSIGN_OR_RETURN(files.root, SignMetadata(SignedToJson(root), root_signers));
  ASSIGN_OR_RETURN(std::vector<const SigningKey*> targets_signers,
                   SignersFor("targets", root.roles["targets"], keys.signers));
  ASSIGN_OR_RETURN(files.targets, SignMetadata(SignedToJson(targets), targets_signers));

  Snapshot snapshot;
  snapshot.version = 1;
  snapshot.expires = options.now + options.snapshot_lifetime;
  snapshot.meta.emplace("targets.json", DescribeMetadataFile(files.targets, targets.version));
  ASSIGN_OR_RETURN(std::vector<const SigningKey*> snapshot_signers,
                   SignersFor("snapshot", root.roles["snapshot"], keys.signers));
  ASSIGN_OR_RETURN(files.snapshot, SignMetadata(SignedToJson(snapshot), snapshot_signers));

  ASSIGN_OR_RETURN(std::vector<const SigningKey*> timestamp_signers,
                   SignersFor("timestamp", root.roles["timestamp"], keys.signers));
  ASSIGN_OR_RETURN(files.timestamp,
                   MakeTimestamp(files.snapshot, snapshot.version, 0,
                                 options.now + options.timestamp_lifetime, timestamp_signers));
  return files;
}

absl::StatusOr<std::string> MakeTimestamp(absl::string_view snapshot_bytes, int64_t snapshot_version,
                                          int64_t previous_version, absl::Time expires,
                                          const std::vector<const SigningKey*>& keys) {
  Timestamp timestamp;
  timestamp.version = previous_version + 1;
  timestamp.expires = expires;
  timestamp.snapshot_meta = DescribeMetadataFile(snapshot_bytes, snapshot_version);
  return SignMetadata(SignedToJson(timestamp), keys);
}

}  // namespace weightpath::trust
