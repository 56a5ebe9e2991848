// The agent as a TUF client (spec 1.0, section 5): before a device installs
// an artifact the server names, the repository's signed metadata must list
// it, with exactly the decision's length and SHA-256, built for this
// device's own hardware class. A compromised server, or a proxy or mirror
// between it and the device, can then name only builds the operators signed.
//
// One update per boot, and per `run` pass that reached the server:
//   1. one fixed start time (the wall clock when the update starts: expiry
//      is judged against it for every file, however long the downloads take);
//   2. the trusted state from state_dir/trust-state.json (SerializeTrusted of
//      the previous update), or else trust.root. Its signatures and hashes
//      are checked again, except while trust-state.json.verified (a stamp
//      written after an update that succeeded) still matches the file's
//      identity (verified_stamp.h) and its SHA-256, and is younger than
//      kDefaultReverifyAfter: then the bytes are the ones that update
//      verified, and only expiry, versions and consistency are checked
//      (trust::PersistedState::kVerifiedWhenWritten). A cached boot then
//      runs no ed25519 verification at all: OpenSSL's provider set-up costs
//      more resident memory (about 2 MiB) than the rest of trust together;
//   3. trust::RefreshMetadata over HTTP (metadata_fetcher.h: each file
//      bounded in bytes and time, within the boot budget);
//   4. the trusted state written back atomically when it changed (also
//      after a failed update: what was verified so far, e.g. a newer root
//      or a newer but expired timestamp, is the next rollback reference).
// Then CheckArtifact: trust::FindTarget for Artifact.target_path and
// trust::CheckArtifactAgainstTarget. The download that follows stops at
// artifact.size_bytes, which the check made the signed length.
//
// Offline or stale metadata (unreachable, expired, refused as an attack)
// blocks a NEW artifact only. An artifact the device already runs was
// verified when it was installed, so a decision naming exactly that
// artifact (same SHA-256 and size) is not refused for want of fresh
// metadata; the boot flow's fallback to the last good decision never asks.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/config/agent_config.h"
#include "common/clock.h"
#include "agent/signed/metadata_fetcher.h"
#include "agent/config/trust_config.h"
#include "trust/client.h"
#include "trust/trusted_metadata_set.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

inline constexpr char kTrustStateFileName[] = "trust-state.json";
std::string TrustStatePath(const std::string& state_dir);

// A state file holds each trusted file's bytes as a JSON string; the
// library's limits (root 512 KB, timestamp 16 KB, snapshot 2 MB, 5 MB per
// targets role) with room for escaping and a few delegated roles.
inline constexpr size_t kMaxTrustStateBytes = size_t{64} << 20;

// The trusted state as the previous update left it: Restore of
// state_dir/trust-state.json, or Create from trust.root when there is no
// state yet. `note` says which, and why a state file was not used.
struct LoadedTrust {
  trust::TrustedMetadataSet set;
  std::string state_bytes;  // the state file as read ("" when there was none)
  std::string source;       // "state_dir/trust-state.json" or "trust.root (PATH)"
  std::optional<std::string> note;
  // The state file's stamp matched: its signatures were not checked again.
  bool verified_when_written = false;
};
// No network. A state file that is unreadable or no longer verifies is
// passed over for trust.root, with the reason in `note`. FAILED_PRECONDITION
// naming trust.root when that is needed and cannot be read or verified.
// `use_stamp`: whether a matching stamp may spare the signature checks
// (`trust status` always checks them).
absl::StatusOr<LoadedTrust> LoadTrustedState(const TrustConfig& config,
                                             const std::string& state_dir,
                                             absl::Time reference_time, bool use_stamp = false);
std::string TrustStateStampPath(const std::string& state_dir);

class TrustClient {
 public:
  TrustClient(TrustConfig config, std::string state_dir, Clock* clock,
              MetadataFetcherFactory fetchers);

  // One update (steps 1-4 above), its downloads within `time_limit` of
  // monotonic time. OK when the metadata is current; otherwise why not (the
  // library's message: the file, the field, the attack), and CheckArtifact
  // refuses new artifacts until an update succeeds.
  absl::Status Update(absl::Duration time_limit);

  // Whether `artifact` may be installed on a device of `hardware_class`
  // (policy's class names: x86_cpu, arm64_cpu, ...), given the last update.
  // `installed`: the artifact the device already runs, if any. Errors:
  //   PERMISSION_DENIED  no target_path, not listed by the verified targets
  //                      (a server or mirror naming a file nobody signed),
  //                      another length or SHA-256, another hardware class
  //   the last update's error, when the metadata is not current and the
  //                      artifact is not `installed`
  absl::Status CheckArtifact(const v1::Artifact& artifact, absl::string_view hardware_class,
                             const v1::Artifact* installed);

  // The set of the last update (null before one, or when neither the state
  // nor trust.root could be read), and that update's outcome.
  const trust::TrustedMetadataSet* trusted() const { return set_ ? &*set_ : nullptr; }
  const absl::Status& last_update() const { return last_update_; }

 private:
  // Whether the state file now holds the state of this update.
  bool Persist(const std::string& previous_state);
  void StampState();

  TrustConfig config_;
  std::string state_dir_;
  Clock* clock_;
  MetadataFetcherFactory fetchers_;
  trust::MetadataFetcher fetch_;
  std::optional<trust::TrustedMetadataSet> set_;
  absl::Status last_update_ = absl::FailedPreconditionError("trust: no metadata update yet");
};

// The client for `config.trust` with HTTP downloads (each request at most
// config.call_timeout), or null when the config has no trust block.
std::unique_ptr<TrustClient> MakeTrustClient(const AgentConfig& config, Clock* clock);

// CheckArtifact with this device's own hardware class, classified from its
// probed profile the way the policy classifies it (never the class the
// server's answer claims). PERMISSION_DENIED when the profile cannot be
// classified.
absl::Status CheckArtifactForDevice(TrustClient& trust, const v1::Artifact& artifact,
                                    const v1::HardwareProfile& profile,
                                    const v1::Artifact* installed);

}  // namespace weightpath::agent
