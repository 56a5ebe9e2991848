#include "agent/cli/command_options.h"

#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace weightpath::agent {
namespace {

// "--config" and "-o" as the common parser names them: "config", "o".
std::string Undashed(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "--")) absl::ConsumePrefix(&name, "-");
  return std::string(name);
}

}  // namespace

bool CommandOptions::Has(const std::string& flag) const { return parsed_.Has(Undashed(flag)); }

std::optional<std::string> CommandOptions::Value(const std::string& name) const {
  return parsed_.Value(Undashed(name));
}

std::string CommandOptions::ValueOr(const std::string& name, const std::string& fallback) const {
  return parsed_.ValueOr(Undashed(name), fallback);
}

std::vector<std::string> CommandOptions::Values(const std::string& name) const {
  return parsed_.Values(Undashed(name));
}

absl::StatusOr<CommandOptions> ParseCommandOptions(
    int argc, char** argv, std::initializer_list<const char*> value_options,
    std::initializer_list<const char*> flags,
    std::initializer_list<const char*> repeatable_options) {
  std::vector<FlagSpec> specs;
  for (const char* name : repeatable_options) {
    specs.push_back({Undashed(name), '\0', true, "", true});
  }
  for (const char* name : value_options) specs.push_back({Undashed(name), '\0', true, "", false});
  for (const char* name : flags) specs.push_back({Undashed(name), '\0', false, "", false});
  absl::StatusOr<ParsedArguments> parsed =
      ParseArguments(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), specs,
                     "argument");
  if (!parsed.ok()) return parsed.status();
  CommandOptions options;
  options.parsed_ = *std::move(parsed);
  return options;
}

int UsageError(absl::string_view command, absl::string_view message, const std::string& usage) {
  return weightpath::UsageError(std::cerr, absl::StrCat("weightpath-agent ", command), message,
                                usage);
}


}  // namespace weightpath::agent
