// Addresses as the flags spell them ("HOST:PORT", "[V6]:PORT", ":PORT"): one
// reading of where the host ends and the port begins, for every place that
// needs it (binding, the loopback check, the address a server reports).
#pragma once

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace weightpath {

struct HostPort {
  std::string host;  // without brackets
  std::string port;  // "" when the address names none
};

// "127.0.0.1:50051" -> {127.0.0.1, 50051}; "[::1]:50051" -> {::1, 50051};
// ":50051" -> {"", 50051}. An address without a port ("localhost", or "::1":
// more than one colon without brackets is a bare IPv6 address, as gRPC reads
// it) is all host.
inline HostPort SplitHostPort(absl::string_view address) {
  absl::string_view rest = address;
  if (absl::ConsumePrefix(&rest, "[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos) return {std::string(address), ""};
    HostPort split{std::string(rest.substr(0, close)), ""};
    rest.remove_prefix(close + 1);
    if (absl::ConsumePrefix(&rest, ":")) split.port = std::string(rest);
    return split;
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || address.find(':') != colon) {
    return {std::string(address), ""};
  }
  return {std::string(address.substr(0, colon)), std::string(address.substr(colon + 1))};
}

// `address` with its port set: "127.0.0.1:0" + 41234 -> "127.0.0.1:41234",
// "[::]:0" + 41234 -> "[::]:41234".
inline std::string WithPort(absl::string_view address, int port) {
  const HostPort split = SplitHostPort(address);
  const bool bracketed = absl::StrContains(split.host, ':');
  return absl::StrCat(bracketed ? "[" : "", split.host, bracketed ? "]" : "", ":", port);
}

}  // namespace weightpath
