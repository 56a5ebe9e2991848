// Walking protobuf wire bytes one top-level field at a time, without a
// parser: for the places that read or hash a message's bytes as they came
// (the resolve request's head, the registry's profile fingerprint). Bounds
// are checked on every byte; anything protobuf would refuse, and groups,
// stop the walk (false) where they start.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace weightpath::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Reads a varint at `*pos`; false when truncated or longer than ten bytes.
inline bool ReadVarint(absl::string_view wire, size_t* pos, uint64_t* value) {
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

// A length as protobuf reads one (ReadSize): at most five bytes.
inline bool ReadLength(absl::string_view wire, size_t* pos, uint64_t* length) {
  const size_t start = *pos;
  return ReadVarint(wire, pos, length) && *pos - start <= 5;
}

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  size_t start = 0;         // first byte of the tag
  size_t tag_size = 0;
  absl::string_view value;  // length-delimited payload (only for that type)
};

// Steps over one field at `*pos`; false on a malformed or unhandled one.
inline bool NextField(absl::string_view wire, size_t* pos, Field* field) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(wire.data());
  field->start = *pos;
  uint64_t tag = 0;
  // One-byte tags and lengths (fields 1-15, values under 128 bytes) are
  // nearly every field of a profile: read them without the loop.
  if (*pos < wire.size() && bytes[*pos] < 0x80) {
    tag = bytes[(*pos)++];
  } else if (!ReadVarint(wire, pos, &tag) || tag > UINT32_MAX) {
    return false;
  }
  field->tag_size = *pos - field->start;
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
      if (*pos < wire.size() && bytes[*pos] < 0x80) {
        length = bytes[(*pos)++];
      } else if (!ReadLength(wire, pos, &length)) {
        return false;
      }
      if (length > wire.size() - *pos) return false;
      // Bounds checked just above; substr would check (and throw) again.
      field->value = absl::string_view(wire.data() + *pos, static_cast<size_t>(length));
      *pos += length;
      return true;
    }
    default:  // groups (3, 4) and the invalid types 6 and 7
      return false;
  }
}

}  // namespace weightpath::wire
