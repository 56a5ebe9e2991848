#include "agent/probe/probe_command.h"

#include <iostream>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/filesystem.h"
#include "agent/probe/probe.h"
#include "agent/probe/profile_text.h"

namespace weightpath::probe {
namespace {

constexpr char kUsage[] = "usage: weightpath-agent probe [--root DIR] [-o json|text]";

struct ProbeArguments {
  std::string root = "/";
  std::string output = "text";
  bool help = false;
};

// nullopt after writing one line naming the bad argument to `err`.
std::optional<ProbeArguments> ParseArguments(const std::vector<std::string>& arguments,
                                             std::ostream& err) {
  ProbeArguments parsed;
  for (size_t i = 1; i < arguments.size(); ++i) {
    const std::string& argument = arguments[i];
    std::string name = argument;
    std::optional<std::string> value;
    if (absl::StartsWith(argument, "--") && argument.find('=') != std::string::npos) {
      name = argument.substr(0, argument.find('='));
      value = argument.substr(argument.find('=') + 1);
    }
    if (name == "-h" || name == "--help") {
      parsed.help = true;
      continue;
    }
    if (name != "--root" && name != "-o" && name != "--output") {
      err << "probe: unknown argument '" << argument << "'; " << kUsage << "\n";
      return std::nullopt;
    }
    if (!value) {
      if (i + 1 >= arguments.size()) {
        err << "probe: " << name << " needs a value; " << kUsage << "\n";
        return std::nullopt;
      }
      value = arguments[++i];
    }
    if (name == "--root") {
      if (value->empty()) {
        err << "probe: --root must not be empty; " << kUsage << "\n";
        return std::nullopt;
      }
      parsed.root = *value;
    } else {
      if (*value != "json" && *value != "text") {
        err << "probe: " << name << " is '" << *value << "', expected json or text\n";
        return std::nullopt;
      }
      parsed.output = *value;
    }
  }
  return parsed;
}

}  // namespace

int RunProbeCommand(const std::vector<std::string>& arguments, std::ostream& out,
                    std::ostream& err) {
  const std::optional<ProbeArguments> parsed = ParseArguments(arguments, err);
  if (!parsed) return 2;
  if (parsed->help) {
    out << kUsage << "\n";
    return 0;
  }
  const auto filesystem = MakeRootedFilesystem(parsed->root);
  const auto profile = ProbeHardware(LiveProbeEnvironment(*filesystem));
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
