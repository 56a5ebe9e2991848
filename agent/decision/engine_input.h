// What a decision may contain before it reaches the engine's unit.
//
// The unit runs `eval "exec vllm serve $WEIGHTPATH_ENGINE_ARGS"` (see
// deploy/systemd/weightpath-agent.service): the hand-over files are shell
// text, and whatever the server sent becomes part of a command line run as
// the engine's user. Values are quoted, but some things cannot be:
//  - an engine_kwargs key becomes the flag name `--key`, written unquoted;
//    a key such as `x $(reboot)` would be run by the shell;
//  - a control character (NUL, newline, ...) cannot pass through the env
//    file the same way in sh and in systemd's EnvironmentFile=, and NUL
//    cannot pass at all;
//  - a string value that starts with '-' reaches the engine's argument
//    parser as an option of its own (`--stop ["x", "--trust-remote-code"]`);
//  - a number that is not finite has no JSON form, so the decision could
//    not be recorded.
// A decision with any of these is refused whole, wherever one is accepted
// (a server answer at boot or in the run loop, a saved file read back), and
// before anything is downloaded, written or saved as last good.
#pragma once

#include "absl/status/status.h"
#include "agent/decision/decision_record.h"

namespace weightpath::agent {

// INVALID_ARGUMENT naming the field (and the key, escaped) that cannot be
// handed to the engine as it is.
absl::Status ValidateForEngine(const DecisionRecord& record);

// Whether `key` can be written as the flag `--key`: 1 to 128 of
// [A-Za-z0-9_-], starting with a letter or digit (so never `--` or `---x`).
bool IsEngineFlagName(absl::string_view key);

}  // namespace weightpath::agent
