// What the engine's unit consumes: the decision JSON and a shell-sourceable
// env file, both replaced atomically.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "agent/decision/decision_record.h"

namespace weightpath::agent {

// The engine's command-line arguments: each engine_kwargs entry as
// --key-with-dashes value (true booleans as a bare flag), then
// --model <artifact_path> when there is an artifact. Values are shell-quoted
// where needed, so `eval "vllm serve $WEIGHTPATH_ENGINE_ARGS"` is exact.
// Keys are written unquoted: only a record that passed ValidateForEngine
// (engine_input.h) may be turned into this line.
std::string EngineArgs(const DecisionRecord& record);

// Lines of NAME=value, every value quoted with EnvFileQuote so that sh's
// `.` and systemd's EnvironmentFile= read the same text: WEIGHTPATH_SOURCE,
// WEIGHTPATH_PATH, WEIGHTPATH_MODEL, WEIGHTPATH_ARTIFACT,
// WEIGHTPATH_QUANTIZATION, WEIGHTPATH_ENGINE_ARGS. The record must have
// passed ValidateForEngine (engine_input.h).
std::string EnvFileContents(const DecisionRecord& record);

// Env file first, decision JSON second: the JSON is the record a human or
// tool inspects, so it only changes once the engine's input already has.
// A file that already holds exactly the new contents is not rewritten.
// A record that fails ValidateForEngine is refused before either is written.
absl::Status WriteHandover(const DecisionRecord& record, const std::string& decision_file,
                           const std::string& env_file);

}  // namespace weightpath::agent
