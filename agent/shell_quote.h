// Quoting for POSIX sh (and systemd EnvironmentFile=, which reads the same
// single-quote form).
#pragma once

#include <string>
#include "absl/strings/string_view.h"

namespace weightpath::agent {

// `text` unchanged when it holds only characters no shell treats specially
// (so the common case stays readable); otherwise wrapped in single quotes,
// each embedded ' written as '\''.
std::string ShellQuote(absl::string_view text);

}  // namespace weightpath::agent
