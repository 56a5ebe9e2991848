// Text from outside (a device's request, a file an operator or an attacker
// wrote, a server's or a mirror's answer) that ends up in a log line, an error
// message, a table on an operator's terminal or a protobuf string must not be
// able to start a line of its own, drive a terminal, reorder what is shown, or
// make the message unparseable: such characters are written as escapes.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace weightpath {
namespace control_characters_internal {

// The length of the well-formed UTF-8 sequence at the start of `text` (1 to
// 4), and its code point; 0 when the first byte does not start one
// (a stray continuation byte, an overlong form, a surrogate, a sequence cut
// short or beyond U+10FFFF).
inline size_t DecodeUtf8(absl::string_view text, uint32_t* code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  uint32_t value = 0;
  uint32_t minimum = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, value = lead & 0x1f, minimum = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, value = lead & 0x0f, minimum = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, value = lead & 0x07, minimum = 0x10000;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
    value = (value << 6) | (byte(i) & 0x3f);
  }
  if (value < minimum || value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) return 0;
  *code_point = value;
  return length;
}

// Characters that are valid UTF-8 but act on a terminal or on how text is
// laid out: the C1 controls (U+0080-U+009F: U+009B is CSI, U+009D OSC), the
// line and paragraph separators (U+2028, U+2029: a new line to some readers)
// and the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
// U+2066-U+2069: they reorder what follows, so a TARGET column can show text
// other than what is stored).
inline bool IsLayoutControl(uint32_t code_point) {
  return (code_point >= 0x80 && code_point <= 0x9f) || code_point == 0x2028 ||
         code_point == 0x2029 || (code_point >= 0x202a && code_point <= 0x202e) ||
         (code_point >= 0x2066 && code_point <= 0x2069);
}

}  // namespace control_characters_internal

// Appends `text` to `out`, escaped so the result is one line of valid UTF-8
// that cannot drive a terminal:
//   - C0 controls (0x00-0x1f: \n, \r, \t, ESC) and DEL as "\xNN";
//   - a byte that is not part of well-formed UTF-8 as "\xNN" (so a proto3
//     string built from the result always parses);
//   - C1 controls, U+2028/U+2029 and bidi controls as "\uNNNN".
// Everything else, valid UTF-8 included, is copied unchanged. A backslash is
// not escaped, so a literal "\x0a" in the input and an escaped newline read
// the same; what matters here is that neither can end the line.
inline void AppendControlEscaped(absl::string_view text, std::string* out) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f) {
      out->push_back(static_cast<char>(byte));
      ++i;
      continue;
    }
    uint32_t code_point = 0;
    const size_t length =
        byte < 0x80 ? 0 : control_characters_internal::DecodeUtf8(text.substr(i), &code_point);
    if (length == 0) {
      out->append("\\x");
      out->push_back(kHexDigits[byte >> 4]);
      out->push_back(kHexDigits[byte & 0xf]);
      ++i;
    } else if (control_characters_internal::IsLayoutControl(code_point)) {
      out->append("\\u");
      for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHexDigits[(code_point >> shift) & 0xf]);
      i += length;
    } else {
      out->append(text.data() + i, length);
      i += length;
    }
  }
}

// True when AppendControlEscaped would change `text`.
inline bool HasControlCharacters(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f) {
      ++i;
      continue;
    }
    if (byte < 0x80) return true;
    uint32_t code_point = 0;
    const size_t length = control_characters_internal::DecodeUtf8(text.substr(i), &code_point);
    if (length == 0 || control_characters_internal::IsLayoutControl(code_point)) return true;
    i += length;
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
