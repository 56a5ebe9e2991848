// `weightpath-agent probe [--root DIR] [-o json|text]`: prints this device's
// hardware profile, the hardware class the rules give it, and one line per
// accelerator saying why it is or is not usable.
//
//   --root DIR   probe a captured tree instead of "/" (default "/"). Only a
//                probe of "/" consults this machine's GPU driver, AMX
//                permission and CPU affinity.
//   --state-dir DIR  keep the GPU inventory in DIR/gpu-inventory and reuse
//                it while nothing the driver exposes has changed (as boot
//                does with the config's state_dir); default: not kept.
//   -o json      the profile as protobuf JSON with the proto field names
//   -o text      a human summary (default)
//
// WEIGHTPATH_HW_PROFILE (or VLLM_OMNI_HW_PROFILE) replaces the probe with
// that JSON file whatever the root. Exit 0 on success, 1 when the probe or
// profile file fails, 2 for bad arguments (one line on stderr naming it).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace weightpath::probe {

// argv as the agent's dispatcher passes it: argv[0] is the subcommand
// ("probe"), options start at argv[1].
int RunProbeCommand(int argc, char** argv);

// The same, writing to the given streams (for tests and embedding).
int RunProbeCommand(const std::vector<std::string>& arguments, std::ostream& out,
                    std::ostream& err);

}  // namespace weightpath::probe
