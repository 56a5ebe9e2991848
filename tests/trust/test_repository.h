// An in-memory TUF repository for the trust suites: real keys, real
// signatures, the four top-level roles, and a fetcher over its files. Each
// test changes what it publishes (or signs something an attacker could) and
// runs the client against it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "trust/client.h"
#include "trust/crypto.h"
#include "trust/metadata.h"
#include "trust/repository.h"
#include "trust/trusted_metadata_set.h"

namespace weightpath::trust::testing {

inline SigningKey NewKey(const std::string& name) {
  absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::Generate();
  if (!key.ok()) {
    ADD_FAILURE() << key.status();
    std::abort();
  }
  return MakeSigningKey(name, *std::move(key));
}

template <typename T>
std::string Sign(const T& signed_part, const std::vector<const SigningKey*>& keys) {
  absl::StatusOr<std::string> bytes = SignMetadata(SignedToJson(signed_part), keys);
  if (!bytes.ok()) {
    ADD_FAILURE() << bytes.status();
    return "";
  }
  return *bytes;
}

// The reference time every test runs at unless it says otherwise.
inline absl::Time TestNow() { return absl::FromUnixSeconds(1'900'000'000); }  // 2030-03-17

class TestRepository {
 public:
  TestRepository() {
    for (const char* role : {"root", "targets", "snapshot", "timestamp"}) {
      keys[role].push_back(NewKey(role));
    }
    root.version = 1;
    root.expires = TestNow() + absl::Hours(24 * 365);
    root.consistent_snapshot = true;
    for (const char* role : {"root", "targets", "snapshot", "timestamp"}) SetRoleKeys(role, 1);
    targets.version = 1;
    targets.expires = TestNow() + absl::Hours(24 * 90);
    snapshot.version = 0;  // PublishAll makes version 1
    timestamp.version = 0;
    snapshot.expires = TestNow() + absl::Hours(24 * 7);
    timestamp.expires = TestNow() + absl::Hours(24);
    PublishRoot();
    PublishTargets();
    PublishSnapshotAndTimestamp();
  }

  // Puts keys[role] into the root with `threshold` (the keys object keeps
  // only keys some role uses).
  void SetRoleKeys(const std::string& role, int64_t threshold) {
    RoleKeys role_keys;
    for (const SigningKey& key : keys[role]) role_keys.keyids.push_back(key.key.keyid);
    role_keys.threshold = threshold;
    root.roles[role] = role_keys;
    root.keys.clear();
    for (const auto& [name, role_keys_entry] : root.roles) {
      for (const std::string& keyid : role_keys_entry.keyids) {
        for (const auto& [unused, list] : keys) {
          for (const SigningKey& key : list) {
            if (key.key.keyid == keyid) root.keys.emplace(keyid, key.key);
          }
        }
        for (const SigningKey& key : retired_keys) {
          if (key.key.keyid == keyid) root.keys.emplace(keyid, key.key);
        }
      }
    }
  }

  std::vector<const SigningKey*> Signers(const std::string& role) const {
    std::vector<const SigningKey*> signers;
    for (const SigningKey& key : keys.at(role)) signers.push_back(&key);
    return signers;
  }

  // root.version, signed by the current root keys (and `extra` ones).
  void PublishRoot(const std::vector<const SigningKey*>& extra = {}) {
    std::vector<const SigningKey*> signers = Signers("root");
    signers.insert(signers.end(), extra.begin(), extra.end());
    files[absl::StrCat(root.version, ".root.json")] = Sign(root, signers);
    files["root.json"] = files[absl::StrCat(root.version, ".root.json")];
  }

  void PublishTargets() {
    files[absl::StrCat(targets.version, ".targets.json")] = Sign(targets, Signers("targets"));
    files["targets.json"] = files[absl::StrCat(targets.version, ".targets.json")];
  }

  void PublishDelegated(const std::string& role, const Targets& delegated,
                        const std::vector<const SigningKey*>& signers) {
    const std::string name = absl::StrCat(delegated.version, ".", role, ".json");
    files[name] = Sign(delegated, signers);
    snapshot.meta[role + ".json"] = DescribeMetadataFile(files[name], delegated.version);
  }

  void PublishSnapshotAndTimestamp() {
    ++snapshot.version;
    snapshot.meta["targets.json"] =
        DescribeMetadataFile(files[absl::StrCat(targets.version, ".targets.json")], targets.version);
    const std::string snapshot_name = absl::StrCat(snapshot.version, ".snapshot.json");
    files[snapshot_name] = Sign(snapshot, Signers("snapshot"));
    files["snapshot.json"] = files[snapshot_name];
    ++timestamp.version;
    timestamp.snapshot_meta = DescribeMetadataFile(files[snapshot_name], snapshot.version);
    files["timestamp.json"] = Sign(timestamp, Signers("timestamp"));
  }

  // A new targets version with `path` added, then snapshot and timestamp.
  void AddTarget(const std::string& path, const std::string& content,
                 const std::vector<std::string>& hardware_classes = {"x86_cpu"}) {
    TargetFile file;
    file.length = static_cast<int64_t>(content.size());
    file.hashes["sha256"] = Sha256Hex(content);
    file.custom = WeightpathTargetToJson(
        {"spark-1.7b", "w4a8-amx", absl::StrCat("v", targets.version + 1), hardware_classes});
    targets.targets[path] = file;
    ++targets.version;
    PublishTargets();
    PublishSnapshotAndTimestamp();
  }

  MetadataFetcher Fetcher() {
    return [this](const MetadataRequest& request) -> absl::StatusOr<std::string> {
      requests.push_back(request);
      auto it = files.find(request.file_name);
      if (it == files.end()) return absl::NotFoundError("404");
      if (static_cast<int64_t>(it->second.size()) > request.max_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("more than ", request.max_bytes, " bytes"));
      }
      return it->second;
    };
  }

  absl::StatusOr<TrustedMetadataSet> NewClient(absl::Time now = TestNow(),
                                               const MetadataLimits& limits = {}) {
    return TrustedMetadataSet::Create(files.at("1.root.json"), now, limits);
  }

  std::map<std::string, std::vector<SigningKey>> keys;
  std::vector<SigningKey> retired_keys;  // still listed while a rotation is signed
  Root root;
  Targets targets;
  Snapshot snapshot;
  Timestamp timestamp;
  std::map<std::string, std::string> files;
  std::vector<MetadataRequest> requests;
};

}  // namespace weightpath::trust::testing
