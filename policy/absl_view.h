// Debian's abseil (20220623) is built with its own absl::string_view, which
// does not convert from std::string_view; the public headers speak std, the
// absl string helpers speak absl.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace weightpath::policy {

inline absl::string_view AbslView(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

}  // namespace weightpath::policy
