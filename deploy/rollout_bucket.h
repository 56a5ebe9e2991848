// Deterministic rollout membership: a device's bucket for a rollout never
// changes, so raising a stage's percentage only ever adds devices.
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"

namespace weightpath::deploy {

inline constexpr uint32_t kBucketCount = 10000;

// The first 8 bytes of SHA-256(rollout_id + "/" + device_id), read as a
// big-endian unsigned 64-bit integer, modulo 10000. deploy/README.md shows
// how to reproduce it with sha256sum and bc.
uint32_t RolloutBucket(absl::string_view rollout_id, absl::string_view device_id);

// A device is in a stage of `percent` when its bucket is below percent * 100.
inline bool BucketWithinPercent(uint32_t bucket, uint32_t percent) {
  return bucket < percent * (kBucketCount / 100);
}

}  // namespace weightpath::deploy
