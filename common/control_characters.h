// Text from outside (a device's request, a file an operator or an attacker
// wrote) that ends up in a log line or an error message must not be able to
// start a line of its own or drive a terminal: control characters in it are
// written as \xNN instead.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace weightpath {

// Appends `text` to `out` with every C0 control character (0x00-0x1f, which
// includes \n, \r and \t) and DEL (0x7f) written as "\xNN" (lowercase hex).
// Everything else, UTF-8 included, is copied unchanged. A backslash is not
// escaped, so a literal "\x0a" in the input and an escaped newline read the
// same; what matters here is that neither can end the line.
inline void AppendControlEscaped(absl::string_view text, std::string* out) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  for (char c : text) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out->append("\\x");
      out->push_back(kHexDigits[byte >> 4]);
      out->push_back(kHexDigits[byte & 0xf]);
    } else {
      out->push_back(c);
    }
  }
}

inline bool HasControlCharacters(absl::string_view text) {
  for (char c : text) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return true;
  }
  return false;
}

inline std::string ControlEscaped(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  AppendControlEscaped(text, &out);
  return out;
}

}  // namespace weightpath
