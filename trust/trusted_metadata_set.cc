#include "trust/trusted_metadata_set.h"

#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace weightpath::trust {
namespace {

// The version tag of SerializeTrusted's document, so a later format can be
// told apart rather than misread.
constexpr absl::string_view kStateFormat = "weightpath-trust-state/1";

std::string Describe(const SignedCommon& common, absl::string_view file) {
  return absl::StrCat(file, " v", common.version);
}

absl::Status CheckSize(absl::string_view label, absl::string_view bytes, int64_t max_bytes) {
  if (static_cast<int64_t>(bytes.size()) > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        label, ": ", bytes.size(), " bytes is more than the ", max_bytes,
        " allowed (endless data: a mirror sending more than the metadata can be)"));
  }
  return absl::OkStatus();
}

absl::Status CheckNotExpired(absl::string_view label, const SignedCommon& common,
                             absl::Time reference_time) {
  if (common.expires > reference_time) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      label, ": version ", common.version, " expired at ", FormatExpires(common.expires),
      " (the update's reference time is ", FormatExpires(reference_time),
      "): a frozen or stale repository (freeze attack)"));
}

// The bytes against what a snapshot or timestamp entry says of them.
absl::Status CheckAgainstMeta(absl::string_view label, absl::string_view bytes,
                              const MetaFile& meta, absl::string_view lister) {
  if (meta.length && static_cast<int64_t>(bytes.size()) != *meta.length) {
    return absl::FailedPreconditionError(
        absl::StrCat(label, ": ", bytes.size(), " bytes, but ", lister, " lists ", *meta.length,
                     " (mix-and-match, or the file was replaced)"));
  }
  for (const auto& [algorithm, expected] : meta.hashes) {
    absl::StatusOr<std::string> actual = HashHex(algorithm, bytes);
    if (!actual.ok()) {
      return absl::Status(actual.status().code(),
                          absl::StrCat(label, ": ", lister, " lists a ", actual.status().message()));
    }
    if (*actual != expected) {
      return absl::FailedPreconditionError(
          absl::StrCat(label, ": ", algorithm, " is ", *actual, ", but ", lister, " lists ",
                       expected, " (mix-and-match, or the file was replaced)"));
    }
  }
  return absl::OkStatus();
}

bool SameRoleKeys(const Root& a, const Root& b, const std::string& role) {
  const RoleKeys& old_keys = a.roles.at(role);
  const RoleKeys& new_keys = b.roles.at(role);
  return old_keys.threshold == new_keys.threshold &&
         std::set<std::string>(old_keys.keyids.begin(), old_keys.keyids.end()) ==
             std::set<std::string>(new_keys.keyids.begin(), new_keys.keyids.end());
}

absl::Status VerifyByRoot(absl::string_view label, const Root& root, int64_t root_version,
                          const std::string& role, absl::string_view canonical_signed,
                          const std::vector<Signature>& signatures) {
  const RoleKeys& keys = root.roles.at(role);
  SignatureTally tally =
      TallySignatures(canonical_signed, signatures, root.keys, keys.keyids, keys.threshold);
  return CheckThreshold(label, absl::StrCat("the ", role, " keys of root v", root_version), tally);
}

}  // namespace

std::string PercentEncodeRoleName(absl::string_view role) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : role) {
    const unsigned char byte = static_cast<unsigned char>(c);
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
  }
  return out;
}

std::string MetadataFileName(absl::string_view role, std::optional<int64_t> version) {
  if (role == "timestamp") return "timestamp.json";
  const std::string name = PercentEncodeRoleName(role);
  if (version) return absl::StrCat(*version, ".", name, ".json");
  return absl::StrCat(name, ".json");
}

absl::StatusOr<TrustedMetadataSet> TrustedMetadataSet::Create(absl::string_view root_bytes,
                                                              absl::Time reference_time,
                                                              const MetadataLimits& limits) {
  return FromRoot(root_bytes, reference_time, limits, /*verify_signatures=*/true);
}

absl::StatusOr<TrustedMetadataSet> TrustedMetadataSet::FromRoot(absl::string_view root_bytes,
                                                                absl::Time reference_time,
                                                                const MetadataLimits& limits,
                                                                bool verify_signatures) {
  RETURN_IF_ERROR(CheckSize("root.json", root_bytes, limits.root_max_bytes));
  ASSIGN_OR_RETURN(Metadata<Root> root, ParseRoot(root_bytes, "root.json"));
  if (verify_signatures) {
    RETURN_IF_ERROR(VerifyByRoot(
        absl::StrCat("root.json (v", root.signed_part.version, ", the trusted root)"),
        root.signed_part, root.signed_part.version, "root", root.canonical_signed,
        root.signatures));
  }
  return TrustedMetadataSet(Trusted<Root>{std::move(root), std::string(root_bytes)},
                            reference_time, limits);
}

bool TrustedMetadataSet::VerifiedWhenWritten(bool persisted) const {
  return persisted && verified_when_written_root_ &&
         *verified_when_written_root_ == root_.metadata.signed_part.version;
}

absl::StatusOr<TrustedMetadataSet> TrustedMetadataSet::Restore(absl::string_view state,
                                                               absl::Time reference_time,
                                                               const MetadataLimits& limits,
                                                               PersistedState provenance) {
  ASSIGN_OR_RETURN(Json document, ParseJson(state, "trust state"));
  const Json* format = document.Find("format");
  if (format == nullptr || !format->is_string() || format->string_value() != kStateFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat("trust state: not a ", kStateFormat, " document"));
  }
  const Json* root = document.Find("root");
  if (root == nullptr || !root->is_string()) {
    return absl::InvalidArgumentError("trust state: root: missing");
  }
  const bool verified_when_written = provenance == PersistedState::kVerifiedWhenWritten;
  ASSIGN_OR_RETURN(TrustedMetadataSet set, FromRoot(root->string_value(), reference_time, limits,
                                                    /*verify_signatures=*/!verified_when_written));
  if (verified_when_written) {
    set.verified_when_written_root_ = set.root_.metadata.signed_part.version;
  }
  if (const Json* timestamp = document.Find("timestamp"); timestamp && timestamp->is_string()) {
    set.persisted_timestamp_ = timestamp->string_value();
  }
  if (const Json* snapshot = document.Find("snapshot"); snapshot && snapshot->is_string()) {
    set.persisted_snapshot_ = snapshot->string_value();
  }
  if (const Json* targets = document.Find("targets"); targets && targets->is_object()) {
    for (const auto& [role, bytes] : targets->object()) {
      if (bytes.is_string()) set.persisted_targets_.emplace(role, bytes.string_value());
    }
  }
  return set;
}

absl::Status TrustedMetadataSet::UpdateRoot(absl::string_view bytes) {
  if (root_chain_finished_) {
    return absl::FailedPreconditionError(
        "root: cannot update the root once the timestamp was loaded (workflow order)");
  }
  const Root& trusted = root_.metadata.signed_part;
  if (trusted.version == std::numeric_limits<int64_t>::max()) {
    return absl::OutOfRangeError("root: the trusted version cannot grow");
  }
  const int64_t expected = trusted.version + 1;
  const std::string label = absl::StrCat(expected, ".root.json");
  RETURN_IF_ERROR(CheckSize(label, bytes, limits_.root_max_bytes));
  ASSIGN_OR_RETURN(Metadata<Root> next, ParseRoot(bytes, label));
  // Signed by the root we trust, so an attacker cannot start a chain...
  RETURN_IF_ERROR(VerifyByRoot(label, trusted, trusted.version, "root", next.canonical_signed,
                               next.signatures));
  if (next.signed_part.version != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat(label, ": version ", next.signed_part.version, ", expected ", expected,
                     next.signed_part.version < expected ? " (rollback)" : " (a skipped root)"));
  }
  // ...and by its own keys, so the new key holders accept it too.
  RETURN_IF_ERROR(VerifyByRoot(absl::StrCat(label, " (its own keys)"), next.signed_part,
                               next.signed_part.version, "root", next.canonical_signed,
                               next.signatures));
  for (const std::string role : {"timestamp", "snapshot"}) {
    if (!SameRoleKeys(trusted, next.signed_part, role)) {
      if (persisted_timestamp_ || persisted_snapshot_) {
        notes_.push_back(absl::StrCat("root v", expected, " changed the ", role,
                                      " keys: the persisted timestamp and snapshot are dropped "
                                      "(fast-forward recovery)"));
      }
      persisted_timestamp_.reset();
      persisted_snapshot_.reset();
    }
  }
  root_ = Trusted<Root>{std::move(next), std::string(bytes)};
  return absl::OkStatus();
}

absl::Status TrustedMetadataSet::FinishRootChain() {
  if (root_chain_finished_) return absl::OkStatus();
  const Root& root = root_.metadata.signed_part;
  // Checked only now: an old device may start from an expired root and
  // still follow the chain to a current one (workflow 5.3.10).
  RETURN_IF_ERROR(CheckNotExpired("root.json", root, reference_time_));
  root_chain_finished_ = true;
  return absl::OkStatus();
}

std::string TrustedMetadataSet::TimestampLabel() const { return "timestamp.json"; }

std::string TrustedMetadataSet::SnapshotLabel() const {
  std::optional<int64_t> version;
  if (root_.metadata.signed_part.consistent_snapshot && timestamp_) {
    version = timestamp_->metadata.signed_part.snapshot_meta.version;
  }
  return MetadataFileName("snapshot", version);
}

absl::Status TrustedMetadataSet::CheckFinalTimestamp() const {
  if (!timestamp_) return absl::FailedPreconditionError("timestamp.json: none is trusted yet");
  return CheckNotExpired(TimestampLabel(), timestamp_->metadata.signed_part, reference_time_);
}

absl::Status TrustedMetadataSet::CheckFinalSnapshot() const {
  RETURN_IF_ERROR(CheckFinalTimestamp());
  if (!snapshot_) return absl::FailedPreconditionError("snapshot.json: none is trusted yet");
  const Snapshot& snapshot = snapshot_->metadata.signed_part;
  const Timestamp& timestamp = timestamp_->metadata.signed_part;
  RETURN_IF_ERROR(CheckNotExpired(SnapshotLabel(), snapshot, reference_time_));
  if (snapshot.version != timestamp.snapshot_meta.version) {
    return absl::FailedPreconditionError(absl::StrCat(
        SnapshotLabel(), ": version ", snapshot.version, ", but ", Describe(timestamp, "timestamp.json"),
        " names snapshot version ", timestamp.snapshot_meta.version, " (mix-and-match)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TimestampUpdate> TrustedMetadataSet::ApplyTimestamp(absl::string_view bytes,
                                                                   bool persisted) {
  const std::string label = persisted ? "persisted timestamp.json" : TimestampLabel();
  RETURN_IF_ERROR(CheckSize(label, bytes, limits_.timestamp_max_bytes));
  ASSIGN_OR_RETURN(Metadata<Timestamp> next, ParseTimestamp(bytes, label));
  const int64_t root_version = root_.metadata.signed_part.version;
  const bool same_as_trusted =
      timestamp_ && timestamp_->bytes == bytes && timestamp_root_version_ == root_version;
  if (!same_as_trusted && !VerifiedWhenWritten(persisted)) {
    RETURN_IF_ERROR(VerifyByRoot(label, root_.metadata.signed_part, root_version, "timestamp",
                                 next.canonical_signed, next.signatures));
  }
  if (timestamp_) {
    const Timestamp& trusted = timestamp_->metadata.signed_part;
    if (next.signed_part.version < trusted.version) {
      return absl::FailedPreconditionError(
          absl::StrCat(label, ": version ", next.signed_part.version, " is older than the trusted ",
                       trusted.version, " (rollback)"));
    }
    if (next.signed_part.version == trusted.version) {
      // Nothing changed upstream; the trusted copy must still be fresh.
      RETURN_IF_ERROR(CheckFinalTimestamp());
      return TimestampUpdate::kUnchanged;
    }
    if (next.signed_part.snapshot_meta.version < trusted.snapshot_meta.version) {
      return absl::FailedPreconditionError(absl::StrCat(
          label, ": names snapshot version ", next.signed_part.snapshot_meta.version,
          ", older than the trusted ", trusted.snapshot_meta.version, " (rollback)"));
    }
  }
  // Trusted before the expiry check: a newer, validly signed timestamp is
  // the rollback reference even when it has expired (workflow 5.4.4).
  timestamp_ = Trusted<Timestamp>{std::move(next), std::string(bytes)};
  timestamp_root_version_ = root_version;
  RETURN_IF_ERROR(CheckFinalTimestamp());
  return TimestampUpdate::kUpdated;
}

absl::Status TrustedMetadataSet::LoadPersistedTimestamp() {
  RETURN_IF_ERROR(FinishRootChain());
  if (persisted_timestamp_tried_ || !persisted_timestamp_) {
    persisted_timestamp_tried_ = true;
    if (timestamp_) return CheckFinalTimestamp();
    return absl::NotFoundError("timestamp.json: no persisted copy");
  }
  persisted_timestamp_tried_ = true;
  if (snapshot_) {
    return absl::FailedPreconditionError(
        "timestamp.json: cannot update the timestamp once a snapshot was loaded");
  }
  // Either it becomes the trusted timestamp or it is no use: in both cases
  // the persisted copy is spent.
  const std::string bytes = *std::move(persisted_timestamp_);
  persisted_timestamp_.reset();
  absl::StatusOr<TimestampUpdate> applied = ApplyTimestamp(bytes, /*persisted=*/true);
  if (!applied.ok() && !timestamp_) {
    notes_.push_back(absl::StrCat("persisted timestamp.json dropped: ", applied.status().message()));
  }
  return applied.status();
}

absl::StatusOr<TimestampUpdate> TrustedMetadataSet::UpdateTimestamp(absl::string_view bytes) {
  if (snapshot_) {
    return absl::FailedPreconditionError(
        "timestamp.json: cannot update the timestamp once a snapshot was loaded (workflow order)");
  }
  RETURN_IF_ERROR(FinishRootChain());
  if (!persisted_timestamp_tried_) {
    // Its outcome is only a reference for the download's checks; why it was
    // not usable is in notes().
    LoadPersistedTimestamp().IgnoreError();
  }
  return ApplyTimestamp(bytes, /*persisted=*/false);
}

absl::Status TrustedMetadataSet::ApplySnapshot(absl::string_view bytes, bool persisted) {
  if (!timestamp_) {
    return absl::FailedPreconditionError("snapshot.json: no timestamp is trusted yet (workflow order)");
  }
  if (targets_.count("targets") != 0) {
    return absl::FailedPreconditionError(
        "snapshot.json: cannot update the snapshot once targets were loaded (workflow order)");
  }
  // A snapshot is never loaded under an expired timestamp (freeze).
  RETURN_IF_ERROR(CheckFinalTimestamp());
  const Timestamp& timestamp = timestamp_->metadata.signed_part;
  const std::string label = persisted ? "persisted snapshot.json" : SnapshotLabel();
  const int64_t max_bytes = timestamp.snapshot_meta.length
                                ? std::min(*timestamp.snapshot_meta.length, limits_.snapshot_max_bytes)
                                : limits_.snapshot_max_bytes;
  RETURN_IF_ERROR(CheckSize(label, bytes, max_bytes));
  // The timestamp's hashes describe the file on the mirror; a persisted copy
  // was checked against them when it was downloaded.
  if (!persisted) {
    RETURN_IF_ERROR(
        CheckAgainstMeta(label, bytes, timestamp.snapshot_meta, Describe(timestamp, "timestamp.json")));
  }
  ASSIGN_OR_RETURN(Metadata<Snapshot> next, ParseSnapshot(bytes, label));
  if (!VerifiedWhenWritten(persisted)) {
    RETURN_IF_ERROR(VerifyByRoot(label, root_.metadata.signed_part,
                                 root_.metadata.signed_part.version, "snapshot",
                                 next.canonical_signed, next.signatures));
  }
  if (snapshot_) {
    // No role may go back, and none may disappear (workflow 5.5.5).
    for (const auto& [file, meta] : snapshot_->metadata.signed_part.meta) {
      auto it = next.signed_part.meta.find(file);
      if (it == next.signed_part.meta.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            label, ": no longer lists ", file, ", which the trusted snapshot v",
            snapshot_->metadata.signed_part.version, " lists at version ", meta.version,
            " (rollback)"));
      }
      if (it->second.version < meta.version) {
        return absl::FailedPreconditionError(absl::StrCat(
            label, ": ", file, " version ", it->second.version, " is older than the trusted ",
            meta.version, " (rollback)"));
      }
    }
  }
  // Trusted before the final checks, as the rollback reference for a
  // download that replaces it (workflow 5.5.4 is checked after 5.5.5).
  snapshot_ = Trusted<Snapshot>{std::move(next), std::string(bytes)};
  return CheckFinalSnapshot();
}

absl::Status TrustedMetadataSet::UpdateSnapshot(absl::string_view bytes) {
  return ApplySnapshot(bytes, /*persisted=*/false);
}

absl::Status TrustedMetadataSet::LoadPersistedSnapshot() {
  if (!persisted_snapshot_) {
    if (snapshot_) return CheckFinalSnapshot();
    return absl::NotFoundError("snapshot.json: no persisted copy");
  }
  const std::string bytes = *std::move(persisted_snapshot_);
  persisted_snapshot_.reset();
  absl::Status status = ApplySnapshot(bytes, /*persisted=*/true);
  if (!status.ok() && !snapshot_) {
    notes_.push_back(absl::StrCat("persisted snapshot.json dropped: ", status.message()));
  }
  return status;
}

absl::Status TrustedMetadataSet::ApplyTargets(absl::string_view bytes, absl::string_view role,
                                              absl::string_view delegator, bool persisted) {
  // Only the top-level targets: a delegated role's copy may have been
  // verified under an older snapshot's delegation.
  const bool verified_when_written =
      VerifiedWhenWritten(persisted) && role == "targets" && delegator == "root";
  if (!snapshot_) {
    return absl::FailedPreconditionError(
        absl::StrCat(role, ".json: no snapshot is trusted yet (workflow order)"));
  }
  // Never under an expired snapshot or one the timestamp does not name.
  RETURN_IF_ERROR(CheckFinalSnapshot());
  const Snapshot& snapshot = snapshot_->metadata.signed_part;
  const std::string file = absl::StrCat(role, ".json");
  auto meta = snapshot.meta.find(file);
  if (meta == snapshot.meta.end()) {
    return absl::NotFoundError(absl::StrCat(file, ": ", Describe(snapshot, "snapshot.json"),
                                            " does not list it"));
  }
  const std::string label = MetadataFileName(
      role, root_.metadata.signed_part.consistent_snapshot ? std::optional<int64_t>(meta->second.version)
                                                          : std::nullopt);
  // The copy kept from the last refresh, of a role that has moved on since,
  // is what every update finds, not an attack: NOT_FOUND, as for no copy at
  // all, so it is downloaded and nothing is noted. The snapshot's length and
  // hashes describe the new version, so they do not judge this copy.
  const auto superseded = [&](int64_t kept_version) {
    return absl::NotFoundError(absl::StrCat("persisted ", file, ": v", kept_version,
                                            " superseded by v", meta->second.version, ", which ",
                                            Describe(snapshot, "snapshot.json"), " names"));
  };
  const int64_t max_bytes = meta->second.length && !persisted
                                ? std::min(*meta->second.length, limits_.targets_max_bytes)
                                : limits_.targets_max_bytes;
  RETURN_IF_ERROR(CheckSize(label, bytes, max_bytes));
  if (!verified_when_written) {
    if (absl::Status matches =
            CheckAgainstMeta(label, bytes, meta->second, Describe(snapshot, "snapshot.json"));
        !matches.ok()) {
      if (persisted) {
        absl::StatusOr<Metadata<Targets>> kept = ParseTargets(bytes, label);
        if (kept.ok() && kept->signed_part.version < meta->second.version) {
          return superseded(kept->signed_part.version);
        }
      }
      return matches;
    }
  }
  ASSIGN_OR_RETURN(Metadata<Targets> next, ParseTargets(bytes, label));

  if (delegator == "root") {
    if (role != "targets") {
      return absl::InvalidArgumentError(absl::StrCat(label, ": root delegates only targets"));
    }
    if (!verified_when_written) {
      RETURN_IF_ERROR(VerifyByRoot(label, root_.metadata.signed_part,
                                   root_.metadata.signed_part.version, "targets",
                                   next.canonical_signed, next.signatures));
    }
  } else {
    const Metadata<Targets>* parent = targets(delegator);
    if (parent == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(label, ": its delegator ", delegator, " is not trusted yet"));
    }
    const DelegatedRole* delegation = nullptr;
    if (parent->signed_part.delegations) {
      for (const DelegatedRole& candidate : parent->signed_part.delegations->roles) {
        if (candidate.name == role) delegation = &candidate;
      }
    }
    if (delegation == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat(label, ": ", delegator, " does not delegate to ", role));
    }
    SignatureTally tally =
        TallySignatures(next.canonical_signed, next.signatures, parent->signed_part.delegations->keys,
                        delegation->keyids, delegation->threshold);
    RETURN_IF_ERROR(CheckThreshold(
        label,
        absl::StrCat("the keys ", delegator, " v", parent->signed_part.version, " delegates ", role, " to"),
        tally));
  }
  if (next.signed_part.version != meta->second.version) {
    const bool older = next.signed_part.version < meta->second.version;
    if (persisted && older) return superseded(next.signed_part.version);
    return absl::FailedPreconditionError(absl::StrCat(
        label, ": version ", next.signed_part.version, ", but ", Describe(snapshot, "snapshot.json"),
        " names version ", meta->second.version, older ? " (rollback)" : " (mix-and-match)"));
  }
  RETURN_IF_ERROR(CheckNotExpired(label, next.signed_part, reference_time_));
  targets_.insert_or_assign(std::string(role), Trusted<Targets>{std::move(next), std::string(bytes)});
  return absl::OkStatus();
}

absl::Status TrustedMetadataSet::LoadPersistedTargets(absl::string_view role,
                                                      absl::string_view delegator) {
  if (targets(role) != nullptr) return absl::OkStatus();
  auto persisted = persisted_targets_.find(role);
  if (persisted == persisted_targets_.end()) {
    return absl::NotFoundError(absl::StrCat(role, ".json: no persisted copy"));
  }
  const std::string bytes = std::move(persisted->second);
  persisted_targets_.erase(persisted);
  absl::Status status = ApplyTargets(bytes, role, delegator, /*persisted=*/true);
  if (!status.ok() && !absl::IsNotFound(status)) {
    notes_.push_back(absl::StrCat("persisted ", role, ".json not used: ", status.message()));
  }
  return status;
}

MetadataRequest TrustedMetadataSet::NextRootRequest() const {
  const int64_t next = root_.metadata.signed_part.version + 1;
  return {"root", MetadataFileName("root", next), limits_.root_max_bytes};
}

MetadataRequest TrustedMetadataSet::TimestampRequest() const {
  return {"timestamp", "timestamp.json", limits_.timestamp_max_bytes};
}

absl::StatusOr<MetadataRequest> TrustedMetadataSet::SnapshotRequest() const {
  if (!timestamp_) return absl::FailedPreconditionError("snapshot.json: no timestamp is trusted yet");
  const MetaFile& meta = timestamp_->metadata.signed_part.snapshot_meta;
  return MetadataRequest{
      "snapshot", SnapshotLabel(),
      meta.length ? std::min(*meta.length, limits_.snapshot_max_bytes) : limits_.snapshot_max_bytes};
}

absl::StatusOr<MetadataRequest> TrustedMetadataSet::TargetsRequest(absl::string_view role) const {
  if (!snapshot_) {
    return absl::FailedPreconditionError(absl::StrCat(role, ".json: no snapshot is trusted yet"));
  }
  const Snapshot& snapshot = snapshot_->metadata.signed_part;
  auto meta = snapshot.meta.find(absl::StrCat(role, ".json"));
  if (meta == snapshot.meta.end()) {
    return absl::NotFoundError(absl::StrCat(role, ".json: ", Describe(snapshot, "snapshot.json"),
                                            " does not list it"));
  }
  const bool consistent = root_.metadata.signed_part.consistent_snapshot;
  return MetadataRequest{
      std::string(role),
      MetadataFileName(role, consistent ? std::optional<int64_t>(meta->second.version) : std::nullopt),
      meta->second.length ? std::min(*meta->second.length, limits_.targets_max_bytes)
                          : limits_.targets_max_bytes};
}

const Metadata<Timestamp>* TrustedMetadataSet::timestamp() const {
  return timestamp_ ? &timestamp_->metadata : nullptr;
}

const Metadata<Snapshot>* TrustedMetadataSet::snapshot() const {
  return snapshot_ ? &snapshot_->metadata : nullptr;
}

const Metadata<Targets>* TrustedMetadataSet::targets(absl::string_view role) const {
  auto it = targets_.find(role);
  return it == targets_.end() ? nullptr : &it->second.metadata;
}

std::string TrustedMetadataSet::SerializeTrusted() const {
  Json state = Json::MakeObject();
  state.Set("format", Json::String(std::string(kStateFormat)));
  state.Set("root", Json::String(root_.bytes));
  if (timestamp_) {
    state.Set("timestamp", Json::String(timestamp_->bytes));
  } else if (persisted_timestamp_) {
    state.Set("timestamp", Json::String(*persisted_timestamp_));
  }
  if (snapshot_) {
    state.Set("snapshot", Json::String(snapshot_->bytes));
  } else if (persisted_snapshot_) {
    state.Set("snapshot", Json::String(*persisted_snapshot_));
  }
  Json targets = Json::MakeObject();
  for (const auto& [role, bytes] : persisted_targets_) targets.Set(role, Json::String(bytes));
  for (const auto& [role, trusted] : targets_) targets.Set(role, Json::String(trusted.bytes));
  state.Set("targets", std::move(targets));
  return PrettyJson(state);
}

}  // namespace weightpath::trust
