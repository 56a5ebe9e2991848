#include "store/encoded_device.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/deterministic_bytes.h"
#include "common/wire_fields.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "store/time_convert.h"

namespace weightpath::store {
namespace {

using google::protobuf::internal::WireFormatLite;

// Kept in columns, so left out of the body: first_seen, last_seen,
// regression_count, last_regression.
bool IsColumnField(uint32_t field_number) {
  return field_number == v1::Device::kFirstSeenFieldNumber ||
         field_number == v1::Device::kLastSeenFieldNumber ||
         field_number == v1::Device::kRegressionCountFieldNumber ||
         field_number == v1::Device::kLastRegressionFieldNumber ||
         field_number == v1::Device::kRolloutSinceFieldNumber ||
         field_number == v1::Device::kHardwareProfileFieldNumber ||
         field_number == v1::Device::kProfileRecordedAtFieldNumber ||
         field_number == v1::Device::kRunningFieldNumber ||
         field_number == v1::Device::kRunningReportedAtFieldNumber ||
         field_number == v1::Device::kRunningSinceFieldNumber ||
         field_number == v1::Device::kDriftFieldNumber;
}

uint64_t Load64(const char* p) {
  uint64_t value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

uint64_t StableHash64(std::string_view bytes) {
  constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ULL;
  uint64_t h = 0x6a09e667f3bcc908ULL ^ (bytes.size() * kMultiplier);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    h = (h ^ Mix(Load64(bytes.data() + i))) * kMultiplier;
    h = (h << 27) | (h >> 37);
  }
  uint64_t tail = 0;
  for (size_t shift = 0; i < bytes.size(); ++i, shift += 8) {
    tail |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << shift;
  }
  return Mix(h ^ Mix(tail ^ 0x5bd1e995ULL));
}

uint64_t ProfileFingerprint(std::string_view profile) {
  // The bytes around each free-RAM field, hashed run by run: no copy. The
  // fields are walked by hand (wire::NextField): a profile is ~200 of them,
  // most CPU flags, and CodedInputStream's per-field cost was most of it.
  const absl::string_view bytes(profile.data(), profile.size());
  uint64_t h = 0x243f6a8885a308d3ULL;
  size_t run_start = 0;
  size_t pos = 0;
  wire::Field field;
  // A malformed field stops the walk: the rest is hashed as it is.
  while (pos < bytes.size() && wire::NextField(bytes, &pos, &field)) {
    if (field.number != v1::HardwareProfile::kRamAvailableBytesFieldNumber ||
        field.wire_type != wire::kVarint) {
      continue;
    }
    h = Mix(h ^ StableHash64(profile.substr(run_start, field.start - run_start)));
    run_start = pos;
  }
  return Mix(h ^ StableHash64(profile.substr(run_start)));
}

std::string BuildKey(absl::string_view path, absl::string_view model,
                     absl::string_view artifact_sha256) {
  if (path.empty()) return "";
  // Newlines cannot occur in the three (report strings are escaped, paths
  // and models come from the policy), so the join is unambiguous.
  return absl::StrCat(path, "\n", model, "\n", artifact_sha256);
}

int64_t RecordFingerprint(std::string_view body, std::string_view profile) {
  const uint64_t h = StableHash64(body);
  if (profile.empty()) return static_cast<int64_t>(h);
  const uint64_t p = ProfileFingerprint(profile);
  return static_cast<int64_t>(Mix(h ^ ((p << 29) | (p >> 35))));
}

EncodedDevice EncodeDevice(const v1::Device& device) {
  // Equal records must give equal bytes, labels included.
  const std::string full = DeterministicBytes(device);
  EncodedDevice encoded;
  encoded.device_id = device.device_id();
  encoded.hardware_class = device.hardware_class();
  encoded.path = device.path();
  encoded.cpu_model = device.profile().cpu_model();
  encoded.policy_version = device.policy_version();
  encoded.agent_version = device.agent_version();
  encoded.rollout_id = device.rollout_id();
  encoded.assigned_key = BuildKey(device.path(), device.model(), device.artifact().sha256());
  if (device.has_first_seen()) encoded.first_seen_us = ToMicros(FromProtoTime(device.first_seen()));
  if (device.has_last_seen()) encoded.last_seen_us = ToMicros(FromProtoTime(device.last_seen()));
  encoded.body.reserve(full.size());
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(full.data()),
                                               static_cast<int>(full.size()));
  while (true) {
    const int start = input.CurrentPosition();
    const uint32_t tag = input.ReadTag();
    if (tag == 0) break;
    if (!WireFormatLite::SkipField(&input, tag)) break;  // cannot happen for bytes we encoded
    if (IsColumnField(WireFormatLite::GetTagFieldNumber(tag))) continue;
    encoded.body.append(full, static_cast<size_t>(start),
                      static_cast<size_t>(input.CurrentPosition() - start));
  }
  if (device.has_hardware_profile()) {
    encoded.profile = DeterministicBytes(device.hardware_profile());
    if (encoded.profile.size() > kMaxStoredProfileBytes) encoded.profile.clear();
  }
  encoded.fingerprint = RecordFingerprint(encoded.body, encoded.profile);
  return encoded;
}

}  // namespace weightpath::store
