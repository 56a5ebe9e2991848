#include "server/fleet/device_record.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/time_convert.h"

namespace weightpath::server {
namespace {

constexpr uint32_t kVarint = 0;
constexpr uint32_t kLengthDelimited = 2;

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

void PutVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void PutTag(std::string& out, uint32_t field, uint32_t wire_type) {
  PutVarint(out, (field << 3) | wire_type);
}

// A length-delimited field whatever its length (map entry keys and values,
// repeated elements: protobuf writes those even when empty).
void PutBytes(std::string& out, uint32_t field, std::string_view bytes) {
  PutTag(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out.append(bytes);
}
size_t BytesSize(uint32_t field, std::string_view bytes) {
  return VarintSize(field << 3) + VarintSize(bytes.size()) + bytes.size();
}

// A proto3 singular string: absent when empty.
void PutString(std::string& out, uint32_t field, std::string_view value) {
  if (!value.empty()) PutBytes(out, field, value);
}
size_t StringSize(uint32_t field, std::string_view value) {
  return value.empty() ? 0 : BytesSize(field, value);
}

void PutProfile(std::string& out, const v1::HardwareProfile& probed) {
  size_t size = StringSize(v1::ProfileSummary::kArchFieldNumber, probed.arch()) +
                StringSize(v1::ProfileSummary::kCpuModelFieldNumber, probed.cpu_model()) +
                StringSize(v1::ProfileSummary::kAcceleratorFieldNumber, probed.accelerator());
  for (const std::string& flag : probed.cpu_flags()) {
    size += BytesSize(v1::ProfileSummary::kCpuFlagsFieldNumber, flag);
  }
  PutTag(out, v1::Device::kProfileFieldNumber, kLengthDelimited);
  PutVarint(out, size);
  PutString(out, v1::ProfileSummary::kArchFieldNumber, probed.arch());
  PutString(out, v1::ProfileSummary::kCpuModelFieldNumber, probed.cpu_model());
  for (const std::string& flag : probed.cpu_flags()) {
    PutBytes(out, v1::ProfileSummary::kCpuFlagsFieldNumber, flag);
  }
  PutString(out, v1::ProfileSummary::kAcceleratorFieldNumber, probed.accelerator());
}

// Deterministic map encoding: entries in key order, each with its key and
// value written even when empty.
void PutLabels(std::string& out, const google::protobuf::Map<std::string, std::string>& labels) {
  std::vector<std::pair<std::string_view, std::string_view>> sorted;
  sorted.reserve(labels.size());
  for (const auto& [key, value] : labels) sorted.emplace_back(key, value);
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [key, value] : sorted) {
    PutTag(out, v1::Device::kLabelsFieldNumber, kLengthDelimited);
    PutVarint(out, BytesSize(1, key) + BytesSize(2, value));
    PutBytes(out, 1, key);
    PutBytes(out, 2, value);
  }
}

void PutArtifact(std::string& out, const v1::Artifact& artifact) {
  const size_t size = artifact.ByteSizeLong();
  PutTag(out, v1::Device::kArtifactFieldNumber, kLengthDelimited);
  PutVarint(out, size);
  const size_t at = out.size();
  out.resize(at + size);
  artifact.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + at));
}

}  // namespace

void FillDeviceRecord(const v1::ResolveWeightPathRequest& request,
                      const v1::ResolveWeightPathResponse& decided,
                      const v1::ResolveWeightPathResponse& per_call, absl::Time now,
                      v1::Device& device) {
  device.Clear();
  device.set_device_id(request.device_id());
  *device.mutable_labels() = request.labels();
  device.set_hardware_class(decided.hardware_class());
  v1::ProfileSummary* profile = device.mutable_profile();
  profile->set_arch(request.profile().arch());
  profile->set_cpu_model(request.profile().cpu_model());
  *profile->mutable_cpu_flags() = request.profile().cpu_flags();
  profile->set_accelerator(request.profile().accelerator());
  device.set_path(decided.weight_path().name());
  *device.mutable_artifact() = per_call.has_artifact() ? per_call.artifact() : decided.artifact();
  device.set_policy_version(decided.policy_version());
  device.set_agent_version(request.agent_version());
  *device.mutable_last_seen() = store::ToTimestamp(now);
  device.set_model(decided.model());
  device.set_effective_priority(decided.effective_priority());
  device.set_rollout_id(per_call.rollout().rollout_id());
  device.set_requested_priority(request.priority());
  if (request.profile().ByteSizeLong() <= store::kMaxStoredProfileBytes) {
    *device.mutable_hardware_profile() = request.profile();
  }
}

store::EncodedDevice EncodeDeviceRecord(const v1::ResolveWeightPathRequest& request,
                                        const v1::ResolveWeightPathResponse& decided,
                                        const v1::ResolveWeightPathResponse& per_call,
                                        absl::Time now, std::string_view profile_wire) {
  store::EncodedDevice record;
  record.device_id = request.device_id();
  record.hardware_class = decided.hardware_class();
  record.path = decided.weight_path().name();
  record.cpu_model = request.profile().cpu_model();
  record.policy_version = decided.policy_version();
  record.agent_version = request.agent_version();
  record.rollout_id = per_call.rollout().rollout_id();
  const v1::Artifact& artifact = per_call.has_artifact() ? per_call.artifact() : decided.artifact();
  record.assigned_key =
      store::BuildKey(decided.weight_path().name(), decided.model(), artifact.sha256());
  record.last_seen_us = store::ToMicros(now);

  // Field-number order, as protobuf serializes; times and regression fields
  // (9, 10, 14, 15) are columns, not body.
  std::string& body = record.body;
  body.reserve(256 + 16 * static_cast<size_t>(request.profile().cpu_flags_size()));
  PutString(body, v1::Device::kDeviceIdFieldNumber, request.device_id());
  PutLabels(body, request.labels());
  PutString(body, v1::Device::kHardwareClassFieldNumber, decided.hardware_class());
  PutProfile(body, request.profile());
  PutString(body, v1::Device::kPathFieldNumber, decided.weight_path().name());
  PutArtifact(body, artifact);
  PutString(body, v1::Device::kPolicyVersionFieldNumber, decided.policy_version());
  PutString(body, v1::Device::kAgentVersionFieldNumber, request.agent_version());
  PutString(body, v1::Device::kModelFieldNumber, decided.model());
  if (decided.effective_priority() != 0) {
    PutTag(body, v1::Device::kEffectivePriorityFieldNumber, kVarint);
    PutVarint(body, static_cast<uint64_t>(static_cast<int64_t>(decided.effective_priority())));
  }
  PutString(body, v1::Device::kRolloutIdFieldNumber, per_call.rollout().rollout_id());
  if (request.priority() != 0) {
    PutTag(body, v1::Device::kRequestedPriorityFieldNumber, kVarint);
    PutVarint(body, static_cast<uint64_t>(static_cast<int64_t>(request.priority())));
  }
  // hardware_profile (19) and profile_recorded_at (20) are columns.
  if (!profile_wire.empty()) {
    if (profile_wire.size() <= store::kMaxStoredProfileBytes) record.profile.assign(profile_wire);
  } else if (const size_t size = request.profile().ByteSizeLong();
             size <= store::kMaxStoredProfileBytes) {
    record.profile.resize(size);
    request.profile().SerializeWithCachedSizesToArray(
        reinterpret_cast<uint8_t*>(record.profile.data()));
  }
  record.fingerprint = store::RecordFingerprint(body, record.profile);
  return record;
}

}  // namespace weightpath::server
