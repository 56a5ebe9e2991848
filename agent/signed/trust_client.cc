#include "agent/signed/trust_client.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/fetch/artifact_fetcher.h"
#include "agent/base/atomic_file.h"
#include "agent/base/local_file.h"
#include "agent/base/log.h"
#include "agent/fetch/verified_stamp.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "policy/absl_view.h"
#include "policy/hardware_class.h"
#include "trust/crypto.h"

namespace weightpath::agent {
namespace {

std::string Versions(const trust::TrustedMetadataSet& set) {
  std::vector<std::string> parts = {absl::StrCat("root v", set.root().signed_part.version)};
  if (const auto* timestamp = set.timestamp()) {
    parts.push_back(absl::StrCat("timestamp v", timestamp->signed_part.version));
  }
  if (const auto* snapshot = set.snapshot()) {
    parts.push_back(absl::StrCat("snapshot v", snapshot->signed_part.version));
  }
  if (const auto* targets = set.targets()) {
    parts.push_back(absl::StrCat("targets v", targets->signed_part.version));
  }
  return absl::StrJoin(parts, ", ");
}

// As the server's catalog bounds it (server/config/catalog.h).
constexpr size_t kMaxTargetPathBytes = 1024;

bool SameArtifact(const v1::Artifact& a, const v1::Artifact& b) {
  return a.sha256() == b.sha256() && a.size_bytes() == b.size_bytes();
}

}  // namespace

std::string TrustStatePath(const std::string& state_dir) {
  return (std::filesystem::path(state_dir) / kTrustStateFileName).string();
}

std::string TrustStateStampPath(const std::string& state_dir) {
  return StampPathFor(TrustStatePath(state_dir));
}

namespace {

// Whether the stamp vouches for exactly these bytes of the state file:
// the same identity before and after they were read (no write or rename
// in between), the same SHA-256, and not older than kDefaultReverifyAfter
// (a clock before the stamp cannot tell the age, so it does not vouch).
bool StampVouchesFor(const std::string& state_dir, const std::string& bytes,
                     const absl::StatusOr<FileIdentity>& identity_before, absl::Time now) {
  if (!identity_before.ok()) return false;
  absl::StatusOr<VerifiedStamp> stamp = ReadStamp(TrustStateStampPath(state_dir));
  if (!stamp.ok()) return false;
  absl::StatusOr<FileIdentity> identity_after = StatFileIdentity(TrustStatePath(state_dir));
  const absl::Duration age = now - stamp->verified_at;
  return identity_after.ok() && *identity_after == *identity_before &&
         stamp->identity == *identity_before && age >= absl::ZeroDuration() &&
         age < kDefaultReverifyAfter && stamp->sha256 == trust::Sha256Hex(bytes);
}

}  // namespace

absl::StatusOr<LoadedTrust> LoadTrustedState(const TrustConfig& config,
                                             const std::string& state_dir,
                                             absl::Time reference_time, bool use_stamp) {
  const std::string state_path = TrustStatePath(state_dir);
  std::optional<std::string> note;
  std::string state_bytes;
  const absl::StatusOr<FileIdentity> identity = StatFileIdentity(state_path);
  absl::StatusOr<std::string> state = ReadLocalFile(state_path, "trust state", kMaxTrustStateBytes);
  if (state.ok()) {
    state_bytes = *state;
    if (use_stamp && StampVouchesFor(state_dir, *state, identity, reference_time)) {
      absl::StatusOr<trust::TrustedMetadataSet> restored = trust::TrustedMetadataSet::Restore(
          *state, reference_time, {}, trust::PersistedState::kVerifiedWhenWritten);
      if (restored.ok()) {
        LoadedTrust loaded{*std::move(restored), std::move(state_bytes), state_path, std::nullopt};
        loaded.verified_when_written = true;
        return loaded;
      }
      // Not even the checks a stamp leaves were passed: verify it all.
    }
    absl::StatusOr<trust::TrustedMetadataSet> restored =
        trust::TrustedMetadataSet::Restore(*state, reference_time);
    if (restored.ok()) {
      return LoadedTrust{*std::move(restored), std::move(state_bytes), state_path, std::nullopt};
    }
    note = absl::StrCat(state_path, " no longer verifies (", restored.status().message(),
                        "); starting again from trust.root");
  } else if (!absl::IsNotFound(state.status())) {
    note = absl::StrCat(state.status().message(), "; starting again from trust.root");
  }
  absl::StatusOr<std::string> root = ReadLocalFile(
      config.root, "trust.root", static_cast<size_t>(trust::MetadataLimits().root_max_bytes));
  if (!root.ok()) {
    return absl::FailedPreconditionError(root.status().message());  // "trust.root: ..."
  }
  absl::StatusOr<trust::TrustedMetadataSet> created =
      trust::TrustedMetadataSet::Create(*root, reference_time);
  if (!created.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("trust.root: ", config.root, ": ", created.status().message()));
  }
  return LoadedTrust{*std::move(created), std::move(state_bytes),
                     absl::StrCat("trust.root (", config.root, ")"), std::move(note)};
}

TrustClient::TrustClient(TrustConfig config, std::string state_dir, Clock* clock,
                         MetadataFetcherFactory fetchers)
    : config_(std::move(config)),
      state_dir_(std::move(state_dir)),
      clock_(clock),
      fetchers_(std::move(fetchers)) {}

absl::Status TrustClient::Update(absl::Duration time_limit) {
  // The workflow's fixed start time: every expiry of this update is judged
  // against it, however long the downloads take.
  const absl::Time start = clock_->Now();
  const MonotonicTime deadline = clock_->MonotonicNow() + time_limit;
  set_.reset();
  fetch_ = fetchers_(deadline);
  absl::StatusOr<LoadedTrust> loaded =
      LoadTrustedState(config_, state_dir_, start, /*use_stamp=*/true);
  if (!loaded.ok()) {
    last_update_ = loaded.status();
    log::Warn("trust: no trusted root: {}; no new artifact is installed",
                 last_update_.ToString());
    return last_update_;
  }
  if (loaded->note) log::Warn("trust: {}", *loaded->note);
  set_.emplace(std::move(loaded->set));
  const int64_t root_before = set_->root().signed_part.version;

  absl::StatusOr<trust::RefreshReport> report = trust::RefreshMetadata(*set_, fetch_);
  for (const std::string& note : set_->notes()) log::Info("trust: {}", note);
  if (set_->root().signed_part.version != root_before) {
    log::Info("trust: followed the root from v{} to v{}", root_before,
                 set_->root().signed_part.version);
  }
  const bool persisted = Persist(loaded->state_bytes);
  if (report.ok() && persisted) StampState();
  if (!report.ok()) {
    last_update_ = report.status();
    log::Warn(
        "trust: metadata from {} not current: {}; no new artifact is installed until an update "
        "succeeds (the artifact already installed still boots)",
        config_.metadata_url, last_update_.ToString());
    return last_update_;
  }
  last_update_ = absl::OkStatus();
  log::Info("trust: metadata current: {} ({}{})", Versions(*set_),
               report->timestamp_unchanged
                   ? "timestamp unchanged"
                   : absl::StrCat("fetched ", absl::StrJoin(report->downloaded, ", ")),
               loaded->verified_when_written
                   ? "; the saved state's signatures were verified when it was written"
                   : "");
  return last_update_;
}

bool TrustClient::Persist(const std::string& previous_state) {
  // Most updates change nothing: an identical rewrite would cost two fsyncs
  // per boot and wear a small device's flash.
  const std::string state = set_->SerializeTrusted();
  if (state == previous_state) return true;
  if (absl::Status written = WriteFileAtomically(TrustStatePath(state_dir_), state);
      !written.ok()) {
    // The next update starts from the older state: it re-fetches, and its
    // rollback reference is older, no worse than that.
    log::Warn("trust: could not save the trusted state: {}", written.ToString());
    return false;
  }
  return true;
}

void TrustClient::StampState() {
  // Called only after an update that succeeded, with the state file holding
  // its result: every file in it was verified against its root just now.
  const std::string state_path = TrustStatePath(state_dir_);
  const std::string stamp_path = TrustStateStampPath(state_dir_);
  absl::StatusOr<FileIdentity> identity = StatFileIdentity(state_path);
  if (!identity.ok()) return;
  const std::string sha256 = trust::Sha256Hex(set_->SerializeTrusted());
  if (absl::StatusOr<VerifiedStamp> stamp = ReadStamp(stamp_path);
      stamp.ok() && stamp->identity == *identity && stamp->sha256 == sha256) {
    return;  // still vouches for the file; its age keeps counting
  }
  // A file written in this very clock tick could change again without its
  // ctime moving: the next update verifies it and stamps it then.
  if (ChangedTooRecentlyToStamp(*identity, absl::Now())) return;
  if (absl::Status written = WriteStamp(stamp_path, {sha256, *identity, clock_->Now()});
      !written.ok()) {
    log::Warn("trust: could not stamp the verified state: {}", written.ToString());
  }
}

absl::Status TrustClient::CheckArtifact(const v1::Artifact& artifact,
                                        absl::string_view hardware_class,
                                        const v1::Artifact* installed) {
  const std::string& target_path = artifact.target_path();
  if (target_path.empty()) {
    return absl::PermissionDeniedError(
        "artifact.target_path: empty: with a trust block only an artifact the signed targets "
        "metadata lists is installed, and the server's answer names none (a plain catalog "
        "without target_path)");
  }
  // No signed target can have such a name, and it would reach the log.
  if (HasControlCharacters(target_path) || target_path.size() > kMaxTargetPathBytes) {
    return absl::PermissionDeniedError(absl::StrCat(
        "artifact.target_path: \"", ControlEscaped(target_path.substr(0, 128)),
        target_path.size() > 128 ? "..." : "", "\" holds control characters or is longer than ",
        kMaxTargetPathBytes, " bytes"));
  }
  if (!last_update_.ok() || !set_) {
    if (installed != nullptr && SameArtifact(artifact, *installed)) {
      log::Info(
          "trust: metadata not current, but {} is the artifact already installed (verified when it "
          "was installed): kept",
          artifact.target_path());
      return absl::OkStatus();
    }
    return absl::Status(
        last_update_.ok() ? absl::StatusCode::kFailedPrecondition : last_update_.code(),
        absl::StrCat("the signed metadata could not be brought up to date (unreachable, "
                     "expired or refused), so no new artifact is installed (",
                     artifact.target_path(),
                     " is not the one installed): ", last_update_.message()));
  }
  absl::StatusOr<trust::TargetInfo> target =
      trust::FindTarget(*set_, artifact.target_path(), &fetch_);
  if (absl::IsNotFound(target.status())) {
    return absl::PermissionDeniedError(
        absl::StrCat(target.status().message(), " (", Versions(*set_),
                     "): the server named an artifact the operators did not sign"));
  }
  RETURN_IF_ERROR(target.status());
  RETURN_IF_ERROR(trust::CheckArtifactAgainstTarget(
      *target, static_cast<int64_t>(artifact.size_bytes()), artifact.sha256(), hardware_class,
      artifact.files_size() > 0));
  log::Info("trust: target {} verified: {} bytes, sha256 {}, for {}, signed by {} v{}",
               target->path, target->file.length, target->sha256, std::string(hardware_class),
               target->role, set_->targets(target->role)->signed_part.version);
  return absl::OkStatus();
}

std::unique_ptr<TrustClient> MakeTrustClient(const AgentConfig& config, Clock* clock) {
  if (!config.trust) return nullptr;
  return std::make_unique<TrustClient>(
      *config.trust, config.state_dir, clock,
      HttpMetadataFetchers(config.trust->metadata_url, clock, config.call_timeout));
}

absl::Status CheckArtifactForDevice(TrustClient& trust, const v1::Artifact& artifact,
                                    const v1::HardwareProfile& profile,
                                    const v1::Artifact* installed) {
  absl::StatusOr<policy::HardwareClass> own = policy::ClassifyHardware(profile);
  if (!own.ok()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "this device's hardware class cannot be determined, so no signed build can be matched "
        "to it: ",
        own.status().message()));
  }
  return trust.CheckArtifact(artifact, policy::AbslView(policy::HardwareClassName(*own)),
                             installed);
}

}  // namespace weightpath::agent
