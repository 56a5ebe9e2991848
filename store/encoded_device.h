// A device record as the registry writes it. The times and the regression
// figures live in their own columns, so the stored body leaves them out: two
// resolves of an unchanged device give the same bytes, and the registry
// rewrites a device's body only when its fingerprint moved (a re-resolve of
// an unchanged device only bumps last_seen).
//
// Resolving threads encode (cheap: one serialization into flat strings), so
// the write-behind queue holds no protobuf objects and the single flusher
// thread spends its time on the database alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "weightpath/v1/fleet.pb.h"

namespace weightpath::store {

struct EncodedDevice {
  std::string device_id;
  std::string hardware_class;
  std::string path;
  std::string cpu_model;
  // Also in the body; columns of the sighting so versions are counted
  // without decoding bodies.
  std::string policy_version;
  std::string agent_version;
  // Also in the body; a column so that the store keeps when it was first
  // given (rollout_since_us: the row's last_seen_us of the first write with
  // this rollout_id).
  std::string rollout_id;
  // BuildKey of the record's path, model and artifact digest: a column, so
  // that drift is found without decoding bodies ("" without a path).
  std::string assigned_key;
  int64_t first_seen_us = 0;  // 0: not given; a new device's first_seen is its last_seen
  int64_t last_seen_us = 0;   // 0: not given (refused by the store)
  std::string body;           // deterministic wire encoding, without the column fields
  // The HardwareProfile the device sent with this resolve, its wire bytes
  // as sent (Device.hardware_profile, a column of its own); "" for none,
  // which leaves a stored profile as it is. At most kMaxStoredProfileBytes.
  std::string profile;
  int64_t fingerprint = 0;    // RecordFingerprint(body, profile)
};

// A resolve request is at most 64 KiB (the server's receive limit); a
// profile is a few KiB even with eight GPUs and their MIG slices. Beyond
// this the registry keeps none (the encoders leave it out, the store
// refuses it naming the field), so the write-behind queue's records stay
// small.
inline constexpr size_t kMaxStoredProfileBytes = 16 * 1024;

EncodedDevice EncodeDevice(const v1::Device& device);

// The identity of a build as the registry compares assigned with running:
// path, model and artifact digest. "" for no path (nothing assigned, or
// nothing running).
std::string BuildKey(absl::string_view path, absl::string_view model,
                     absl::string_view artifact_sha256);

// What decides whether a stored profile is rewritten: its bytes less the
// free RAM (HardwareProfile.ram_available_bytes, top level), which a probe
// reads anew every time and which neither validation nor the rules read. A
// device that resolves again with only that figure moved keeps its stored
// profile, and its sighting is only bumped.
uint64_t ProfileFingerprint(std::string_view profile);

// The record's fingerprint: StableHash64(body) alone without a profile (the
// fingerprint records had before profiles were kept), else both.
int64_t RecordFingerprint(std::string_view body, std::string_view profile);

// Stable across runs and builds (unlike absl::Hash, which is seeded per
// process), so a restarted server still recognises unchanged records.
uint64_t StableHash64(std::string_view bytes);

}  // namespace weightpath::store
