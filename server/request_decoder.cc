#include "server/request_decoder.h"

#include <cstdint>
#include <cstring>

namespace weightpath::server {
namespace {

constexpr int kRequestProfileField = 2;   // ResolveWeightPathRequest.profile
constexpr int kProfileCpuFlagsField = 3;  // HardwareProfile.cpu_flags

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// A flag's tag and length take one byte each unless it is longer than 127
// bytes; longer ones are not in a run and make the decoder decline.
constexpr auto kFlagTag = static_cast<uint8_t>(kProfileCpuFlagsField << 3 | kLengthDelimited);

// Reads a varint at `*pos`; false when truncated or longer than ten bytes.
bool ReadVarint(absl::string_view wire, size_t* pos, uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && *pos < wire.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(wire[(*pos)++]);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return true;
    }
  }
  return false;
}

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  size_t start = 0;         // first byte of the tag
  absl::string_view value;  // length-delimited payload (only for that type)
};

// Steps over one field; false on anything the fast path does not handle.
bool NextField(absl::string_view wire, size_t* pos, Field* field) {
  field->start = *pos;
  uint64_t tag = 0;
  if (!ReadVarint(wire, pos, &tag) || tag > UINT32_MAX) return false;
  field->number = static_cast<uint32_t>(tag >> 3);
  field->wire_type = static_cast<uint32_t>(tag & 7);
  if (field->number == 0) return false;
  uint64_t scalar = 0;
  switch (field->wire_type) {
    case kVarint:
      return ReadVarint(wire, pos, &scalar);
    case kFixed64:
      if (wire.size() - *pos < 8) return false;
      *pos += 8;
      return true;
    case kFixed32:
      if (wire.size() - *pos < 4) return false;
      *pos += 4;
      return true;
    case kLengthDelimited: {
      uint64_t length = 0;
      if (!ReadVarint(wire, pos, &length) || length > wire.size() - *pos) return false;
      field->value = wire.substr(*pos, length);
      *pos += length;
      return true;
    }
    default:  // groups (3, 4) and the invalid types 6 and 7
      return false;
  }
}

// The end of the run of short flag fields starting at `start`; `start` when
// the bytes there are malformed.
size_t FlagRunEnd(absl::string_view wire, size_t start) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(wire.data());
  size_t pos = start;
  while (wire.size() - pos >= 2 && bytes[pos] == kFlagTag && bytes[pos + 1] < 0x80) {
    const size_t length = bytes[pos + 1];
    if (length > wire.size() - pos - 2) return start;
    pos += 2 + length;
  }
  return pos;
}

}  // namespace

void RequestDecoder::Reset(v1::ResolveWeightPathRequest* request) {
  // Clear() would delete the profile sub-message and with it every flag
  // string; detached, cleared and put back, it keeps them.
  v1::HardwareProfile* profile = request->release_profile();
  request->Clear();
  if (profile == nullptr) profile = new v1::HardwareProfile();
  if (lent_ >= 0) {
    flag_lists_[lent_].flags.Swap(profile->mutable_cpu_flags());
    lent_ = -1;
  }
  profile->Clear();
  request->set_allocated_profile(profile);
}

int RequestDecoder::cached_flag_lists() const {
  int cached = 0;
  for (const FlagList& list : flag_lists_) cached += list.wire.empty() ? 0 : 1;
  return cached;
}

RequestDecoder::FlagList* RequestDecoder::FlagsFor(absl::string_view run) {
  for (FlagList& list : flag_lists_) {
    if (list.wire.size() == run.size() && std::memcmp(list.wire.data(), run.data(), run.size()) == 0) {
      return &list;
    }
  }
  FlagList& list = flag_lists_[next_victim_];
  next_victim_ = (next_victim_ + 1) % kCachedFlagLists;
  list.wire.clear();
  list.flags.Clear();  // keeps the strings for Add() to reuse
  const auto* bytes = reinterpret_cast<const uint8_t*>(run.data());
  for (size_t pos = 0; pos < run.size();) {
    const size_t length = bytes[pos + 1];
    const uint8_t* flag = bytes + pos + 2;
    uint8_t seen = 0;
    for (size_t i = 0; i < length; ++i) seen |= flag[i];
    if ((seen & 0x80) != 0) {  // protobuf decides on UTF-8
      list.flags.Clear();
      return nullptr;
    }
    list.flags.Add()->append(reinterpret_cast<const char*>(flag), length);
    pos += 2 + length;
  }
  list.wire.assign(run.data(), run.size());
  return &list;
}

bool RequestDecoder::SplitProfile(absl::string_view wire, v1::HardwareProfile* profile) {
  size_t pos = 0;
  Field field;
  while (pos < wire.size()) {
    if (static_cast<uint8_t>(wire[pos]) == kFlagTag) {
      // One run per request: a second one, or a profile sent twice, is
      // left to protobuf.
      if (lent_ >= 0) return false;
      const size_t run_end = FlagRunEnd(wire, pos);
      if (run_end == pos) return false;
      FlagList* list = FlagsFor(wire.substr(pos, run_end - pos));
      if (list == nullptr) return false;
      list->flags.Swap(profile->mutable_cpu_flags());
      lent_ = static_cast<int>(list - flag_lists_.data());
      pos = run_end;
      continue;
    }
    if (!NextField(wire, &pos, &field)) return false;
    // A flag not in the run form (one longer than 127 bytes).
    if (field.number == kProfileCpuFlagsField) return false;
    profile_rest_.append(wire.data() + field.start, pos - field.start);
  }
  return true;
}

bool RequestDecoder::Decode(absl::string_view wire, v1::ResolveWeightPathRequest* request) {
  request_rest_.clear();
  profile_rest_.clear();
  v1::HardwareProfile* profile = request->mutable_profile();
  bool profile_sent = false;
  size_t pos = 0;
  Field field;
  while (pos < wire.size()) {
    if (!NextField(wire, &pos, &field)) return false;
    if (field.number == kRequestProfileField && field.wire_type == kLengthDelimited) {
      profile_sent = true;
      if (!SplitProfile(field.value, profile)) return false;
    } else {
      request_rest_.append(wire.data() + field.start, pos - field.start);
    }
  }
  // The kept profile is only given up when none came, which no valid
  // request does.
  if (!profile_sent) request->clear_profile();
  return request->MergeFromString(request_rest_) &&
         (!profile_sent || profile->MergeFromString(profile_rest_));
}

}  // namespace weightpath::server
