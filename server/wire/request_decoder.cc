#include "server/wire/request_decoder.h"

#include <cstdint>
#include <cstring>

#include "common/wire_fields.h"

namespace weightpath::server {
namespace {

constexpr int kRequestProfileField = 2;   // ResolveWeightPathRequest.profile
constexpr int kProfileCpuFlagsField = 3;  // HardwareProfile.cpu_flags

using wire::Field;
using wire::kFixed32;
using wire::kFixed64;
using wire::kLengthDelimited;
using wire::kVarint;
using wire::NextField;
using wire::ReadLength;
using wire::ReadVarint;

constexpr int kProfileClustersField = 6;  // HardwareProfile.clusters

constexpr uint8_t TagByte(int field) { return static_cast<uint8_t>(field << 3 | 2); }

// The end of the run of length-delimited fields with one-byte tag `tag`
// starting at `start`; `start` when a length there is malformed.
size_t RunEnd(absl::string_view wire, size_t start, uint8_t tag) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(wire.data());
  size_t pos = start;
  while (pos < wire.size() && bytes[pos] == tag) {
    size_t next = pos + 1;
    uint64_t length = 0;
    if (next < wire.size() && bytes[next] < 0x80) {  // every flag: a one-byte length
      length = bytes[next++];
    } else if (!ReadLength(wire, &next, &length)) {
      return start;
    }
    if (length > wire.size() - next) return start;
    pos = next + length;
  }
  return pos;
}

// Calls `each` with every element's bytes in a run RunEnd accepted.
template <typename Each>
bool ForEachInRun(absl::string_view run, Each each) {
  for (size_t pos = 0; pos < run.size();) {
    size_t next = pos + 1;
    uint64_t length = 0;
    ReadVarint(run, &next, &length);
    if (!each(run.substr(next, length))) return false;
    pos = next + length;
  }
  return true;
}

bool ParseElement(absl::string_view bytes, std::string* flag) {
  uint8_t seen = 0;
  for (const char c : bytes) seen |= static_cast<uint8_t>(c);
  if ((seen & 0x80) != 0) return false;  // protobuf decides on UTF-8
  flag->append(bytes.data(), bytes.size());  // a cleared string: capacity kept
  return true;
}

bool ParseElement(absl::string_view bytes, v1::CpuCluster* cluster) {
  return cluster->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace

template <typename Element>
google::protobuf::RepeatedPtrField<Element>* KeptRuns<Element>::Find(absl::string_view run) {
  for (Entry& entry : entries_) {
    if (entry.wire.size() == run.size() &&
        std::memcmp(entry.wire.data(), run.data(), run.size()) == 0) {
      return &entry.elements;
    }
  }
  Entry& entry = entries_[next_victim_];
  next_victim_ = (next_victim_ + 1) % kEntries;
  entry.wire.clear();
  entry.elements.Clear();  // keeps the elements for Add() to reuse
  if (!ForEachInRun(run, [&](absl::string_view bytes) {
        return ParseElement(bytes, entry.elements.Add());
      })) {
    entry.elements.Clear();
    return nullptr;
  }
  entry.wire.assign(run.data(), run.size());
  return &entry.elements;
}

template <typename Element>
void KeptRuns<Element>::Lend(google::protobuf::RepeatedPtrField<Element>* elements,
                             google::protobuf::RepeatedPtrField<Element>* field) {
  for (int i = 0; i < kEntries; ++i) {
    if (&entries_[i].elements == elements) lent_ = i;
  }
  elements->Swap(field);
}

template <typename Element>
void KeptRuns<Element>::Return(google::protobuf::RepeatedPtrField<Element>* field) {
  if (lent_ < 0) return;
  entries_[lent_].elements.Swap(field);
  lent_ = -1;
}

template <typename Element>
int KeptRuns<Element>::size() const {
  int kept = 0;
  for (const Entry& entry : entries_) kept += entry.wire.empty() ? 0 : 1;
  return kept;
}

template class KeptRuns<std::string>;
template class KeptRuns<v1::CpuCluster>;

namespace {

// Finds or parses the run at `*pos` and lends it to `field`; false to
// decline (a second run of the same field, a malformed one).
template <typename Element>
bool TakeRun(absl::string_view wire, size_t* pos, uint8_t tag, KeptRuns<Element>* kept,
             google::protobuf::RepeatedPtrField<Element>* field) {
  if (kept->lent()) return false;  // one run per request; more are protobuf's
  const size_t end = RunEnd(wire, *pos, tag);
  if (end == *pos) return false;
  google::protobuf::RepeatedPtrField<Element>* elements = kept->Find(wire.substr(*pos, end - *pos));
  if (elements == nullptr) return false;
  kept->Lend(elements, field);
  *pos = end;
  return true;
}

}  // namespace

void RequestDecoder::Reset(v1::ResolveWeightPathRequest* request) {
  // Clear() would delete the profile sub-message and with it every flag
  // string, so it is detached and kept cleared instead. It is not put back:
  // a request that sends no profile must have none, whichever parser fills
  // it next.
  std::unique_ptr<v1::HardwareProfile> profile(request->release_profile());
  request->Clear();
  if (profile == nullptr) return;
  flags_.Return(profile->mutable_cpu_flags());
  clusters_.Return(profile->mutable_clusters());
  profile->Clear();
  // A profile protobuf allocated on a declined request replaces none kept.
  if (spare_profile_ == nullptr) spare_profile_ = std::move(profile);
}

bool RequestDecoder::SplitProfile(absl::string_view wire, v1::HardwareProfile* profile) {
  constexpr uint8_t kFlagTag = TagByte(kProfileCpuFlagsField);
  constexpr uint8_t kClusterTag = TagByte(kProfileClustersField);
  size_t pos = 0;
  Field field;
  while (pos < wire.size()) {
    const auto tag = static_cast<uint8_t>(wire[pos]);
    if (tag == kFlagTag) {
      if (!TakeRun(wire, &pos, kFlagTag, &flags_, profile->mutable_cpu_flags())) return false;
      continue;
    }
    if (tag == kClusterTag) {
      if (!TakeRun(wire, &pos, kClusterTag, &clusters_, profile->mutable_clusters())) return false;
      continue;
    }
    if (!NextField(wire, &pos, &field)) return false;
    // Same field numbers under a tag of more than one byte (never written by
    // a protobuf encoder, but valid) go to protobuf.
    if (field.number == kProfileCpuFlagsField || field.number == kProfileClustersField) return false;
    profile_rest_.append(wire.data() + field.start, pos - field.start);
  }
  return true;
}

bool RequestDecoder::Decode(absl::string_view wire, v1::ResolveWeightPathRequest* request) {
  request_rest_.clear();
  profile_rest_.clear();
  v1::HardwareProfile* profile = nullptr;  // attached when the first one arrives
  size_t pos = 0;
  Field field;
  while (pos < wire.size()) {
    if (!NextField(wire, &pos, &field)) return false;
    if (field.number == kRequestProfileField && field.wire_type == kLengthDelimited) {
      // Protobuf never sees this field's bytes: a tag in more than one byte
      // (valid to protobuf only up to five) is left to it whole.
      if (field.tag_size != 1) return false;
      if (profile == nullptr) {
        if (spare_profile_ == nullptr) spare_profile_ = std::make_unique<v1::HardwareProfile>();
        profile = spare_profile_.release();
        request->set_allocated_profile(profile);
      }
      if (!SplitProfile(field.value, profile)) return false;
    } else {
      request_rest_.append(wire.data() + field.start, pos - field.start);
    }
  }
  return request->MergeFromString(request_rest_) &&
         (profile == nullptr || profile->MergeFromString(profile_rest_));
}

namespace {

uint64_t Load64(const char* bytes) {
  uint64_t word = 0;
  std::memcpy(&word, bytes, 8);
  return word;
}

bool AllAscii(absl::string_view bytes) {
  constexpr uint64_t kHighBits = 0x8080808080808080ULL;
  const size_t size = bytes.size();
  if (size >= 8) {
    uint64_t seen = Load64(bytes.data() + size - 8);  // the tail, overlapping
    for (size_t i = 0; i + 8 <= size; i += 8) seen |= Load64(bytes.data() + i);
    return (seen & kHighBits) == 0;
  }
  uint8_t seen = 0;
  for (const char c : bytes) seen |= static_cast<uint8_t>(c);
  return (seen & 0x80) == 0;
}

// A map entry as protobuf writes one: key (field 1) then value (field 2),
// each with a one-byte length, the value left out when empty.
bool PlainLabelEntry(absl::string_view entry) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(entry.data());
  if (entry.size() < 3 || bytes[0] != TagByte(1)) return false;
  const size_t key_size = bytes[1];
  if (key_size == 0 || key_size >= 0x80 || key_size > entry.size() - 2) return false;
  const size_t value_at = 2 + key_size;
  if (value_at != entry.size()) {
    if (entry.size() - value_at < 2 || bytes[value_at] != TagByte(2)) return false;
    const size_t value_size = bytes[value_at + 1];
    if (value_size >= 0x80 || value_size != entry.size() - value_at - 2) return false;
  }
  return AllAscii(entry);
}

}  // namespace

bool DecodeRequestHead(absl::string_view wire, RequestHead* head) {
  using Request = v1::ResolveWeightPathRequest;
  *head = RequestHead();
  const auto* bytes = reinterpret_cast<const uint8_t*>(wire.data());
  uint32_t seen = 0;
  size_t pos = 0;
  while (pos < wire.size()) {
    const uint8_t tag = bytes[pos++];
    const int field = tag >> 3;
    if (field == Request::kPriorityFieldNumber || field == Request::kDryRunFieldNumber ||
        field == Request::kAcceptsDirectoryBuildsFieldNumber) {
      if (tag != (field << 3 | kVarint) || pos == wire.size() || (seen & (1u << field)) != 0) return false;
      const uint8_t value = bytes[pos++];
      // One byte each, which also declines every longer varint: a priority
      // the enum names, a bool as protobuf writes one (0 or 1). Anything
      // else (a bool of 2, which protobuf reads as true) is protobuf's.
      if (field == Request::kPriorityFieldNumber) {
        if (value > v1::PRIORITY_FIDELITY) return false;
        head->priority = static_cast<v1::Priority>(value);
      } else {
        if (value > 1) return false;
        (field == Request::kDryRunFieldNumber ? head->dry_run : head->accepts_directory_builds) =
            value == 1;
      }
      seen |= 1u << field;
      continue;
    }
    if (field < Request::kDeviceIdFieldNumber || field > Request::kKnownDecisionEtagFieldNumber ||
        tag != TagByte(field)) {
      return false;
    }
    // A length in at most three bytes (a request is under 4 MiB): protobuf
    // reads at most five, so anything longer is left to it.
    uint64_t length = 0;
    const size_t length_at = pos;
    if (pos < wire.size() && bytes[pos] < 0x80) {
      length = bytes[pos++];
    } else if (!ReadVarint(wire, &pos, &length) || pos - length_at > 3) {
      return false;
    }
    if (length > wire.size() - pos) return false;
    const absl::string_view value = wire.substr(pos, length);
    pos += length;
    if (field == Request::kLabelsFieldNumber) {
      if (!PlainLabelEntry(value)) return false;
      ++head->label_count;
      continue;
    }
    if ((seen & (1u << field)) != 0) return false;
    seen |= 1u << field;
    if (field != Request::kProfileFieldNumber && !AllAscii(value)) return false;
    switch (field) {
      case Request::kDeviceIdFieldNumber: head->device_id = value; break;
      case Request::kProfileFieldNumber: head->profile = value; break;
      case Request::kModelFieldNumber: head->model = value; break;
      case Request::kAgentVersionFieldNumber: head->agent_version = value; break;
      case Request::kKnownDecisionEtagFieldNumber: head->known_decision_etag = value; break;
      default: return false;
    }
  }
  return (seen & (1u << Request::kProfileFieldNumber)) != 0;
}

}  // namespace weightpath::server
