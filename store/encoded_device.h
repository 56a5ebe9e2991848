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
  int64_t first_seen_us = 0;  // 0: not given; a new device's first_seen is its last_seen
  int64_t last_seen_us = 0;   // 0: not given (refused by the store)
  std::string body;           // deterministic wire encoding, without the column fields
  int64_t fingerprint = 0;    // StableHash64(body)
};

EncodedDevice EncodeDevice(const v1::Device& device);

// Stable across runs and builds (unlike absl::Hash, which is seeded per
// process), so a restarted server still recognises unchanged records.
uint64_t StableHash64(std::string_view bytes);

}  // namespace weightpath::store
