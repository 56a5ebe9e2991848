// Text that crosses to another party (an error message in a gRPC trailer, an
// audit field) is cut to a bound, so one long value a caller sent cannot make
// the answer too large for the peer to read.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace weightpath {

// `text` unchanged when it fits in `max_bytes`; otherwise its first bytes, cut
// at the start of a UTF-8 character, then " ...(+N bytes)" saying how much was
// left out (so the result can pass `max_bytes` by that marker's length).
inline std::string CutToBytes(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), " ...(+", text.size() - cut, " bytes)");
}

}  // namespace weightpath
