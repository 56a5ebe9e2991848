// Quoting for POSIX sh, and for env files that sh and systemd both read.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

namespace weightpath::agent {

// `text` unchanged when it holds only characters no shell treats specially
// (so the common case stays readable); otherwise wrapped in single quotes,
// each embedded ' written as '\''.
std::string ShellQuote(absl::string_view text);

// A value for a NAME=value line that reads back as exactly `text` both when
// sh sources the file (`.`) and when systemd reads it (EnvironmentFile=).
// The two disagree on ShellQuote's form: systemd keeps every quote after the
// first quoted part literally, so 'it'\''s' reads back as it''s' there (and
// a value holding quoted words comes out with its quotes shifted, which
// `eval` then runs unquoted). Both agree on a bare word, on '...' without a
// single quote inside, and on "..." with \ " $ ` escaped by a backslash, so
// a value with a single quote is double-quoted. `text` must not hold control
// characters (see engine_input.h): NUL cannot be represented at all.
std::string EnvFileQuote(absl::string_view text);

}  // namespace weightpath::agent
