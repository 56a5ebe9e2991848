// The engine's unit, as deploy/systemd/weightpath-agent.service ships it:
//   EnvironmentFile=/run/weightpath/engine.env
//   ExecStart=/bin/sh -c 'eval "exec /usr/bin/vllm serve $$WEIGHTPATH_ENGINE_ARGS"'
// run for real against an env file the agent wrote, with a stand-in for vllm
// that prints the argv it was given. Hand-over tests use it to check that
// what the engine receives is exactly what the decision said, and that
// nothing in a decision ever runs as a command.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weightpath::agent::testing {

struct EngineLaunch {
  int exit_code = -1;
  std::vector<std::string> argv;  // after "serve"
  std::string err;
};

// The ExecStart line's script (systemd turns $$ into $), with `engine` in
// place of /usr/bin/vllm.
std::string UnitExecStartScript(const std::string& engine);

// Writes the stand-in engine to `dir`/fake-vllm and returns its path.
std::string WriteFakeEngine(const std::string& dir);

// `env_file` sourced by sh (`. env_file`), then the unit's script.
EngineLaunch LaunchWithShell(const std::string& env_file, const std::string& engine);

// The variables systemd's EnvironmentFile= would set from `env_file`, read
// by systemd's own parser (load_env_file in libsystemd-shared, the function
// the service manager calls). UNIMPLEMENTED where libsystemd-shared is not
// installed; a test then skips.
absl::StatusOr<std::map<std::string, std::string>> ReadLikeSystemd(const std::string& env_file);

// `environment` (from ReadLikeSystemd) given to the unit's script.
EngineLaunch LaunchWithEnvironment(const std::map<std::string, std::string>& environment,
                                   const std::string& engine);

}  // namespace weightpath::agent::testing
