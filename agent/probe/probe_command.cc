#include "agent/probe/probe_command.h"

#include <algorithm>
#include <iostream>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/filesystem.h"
#include "agent/probe/probe.h"
#include "agent/probe/profile_text.h"
#include "common/command_line.h"

namespace weightpath::probe {
namespace {

constexpr char kUsage[] =
    "usage: weightpath-agent probe [--root DIR] [--state-dir DIR] [-o json|text]";

constexpr char kWho[] = "weightpath-agent probe";

struct ProbeArguments {
  std::string root = "/";
  std::string state_dir;
  std::string output = "text";
  bool help = false;
};

// An error message naming the bad argument.
absl::StatusOr<ProbeArguments> ParseProbeArguments(const std::vector<std::string>& arguments) {
  static const std::vector<FlagSpec> kFlags = {
      {"root", '\0', true, "probe a captured tree instead of /", false},
      {"state-dir", '\0', true, "keep the GPU inventory there between probes", false},
      {"output", 'o', true, "json or text (default)", false},
  };
  absl::StatusOr<ParsedArguments> parsed = ParseArguments(
      std::vector<std::string>(arguments.begin() + std::min<size_t>(arguments.size(), 1),
                               arguments.end()),
      kFlags, "argument");
  if (!parsed.ok()) return parsed.status();
  ProbeArguments result;
  result.help = parsed->help();
  result.root = parsed->ValueOr("root", "/");
  if (result.root.empty()) return absl::InvalidArgumentError("--root must not be empty");
  result.state_dir = parsed->ValueOr("state-dir", "");
  result.output = parsed->ValueOr("output", "text");
  if (result.output != "json" && result.output != "text") {
    return absl::InvalidArgumentError(
        absl::StrCat("-o is '", result.output, "', expected json or text"));
  }
  return result;
}

}  // namespace

int RunProbeCommand(const std::vector<std::string>& arguments, std::ostream& out,
                    std::ostream& err) {
  const absl::StatusOr<ProbeArguments> parsed = ParseProbeArguments(arguments);
  if (!parsed.ok()) return UsageError(err, kWho, parsed.status().message(), kUsage);
  if (parsed->help) return ShowHelp(out, absl::StrCat(kUsage, "\n"));
  const auto filesystem = MakeRootedFilesystem(parsed->root);
  const auto profile = ProbeHardware(LiveProbeEnvironment(*filesystem, parsed->state_dir));
  if (!profile.ok()) {
    err << "probe: " << profile.status() << "\n";
    return 1;
  }
  if (parsed->output == "text") {
    out << ProfileText(*profile);
    return 0;
  }
  const auto json = ProfileJson(*profile);
  if (!json.ok()) {
    err << "probe: " << json.status().message() << "\n";
    return 1;
  }
  out << *json;
  return 0;
}

int RunProbeCommand(int argc, char** argv) {
  return RunProbeCommand(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr);
}

}  // namespace weightpath::probe
