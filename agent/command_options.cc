#include "agent/command_options.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "agent/boot_flow.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace weightpath::agent {
namespace {

bool Contains(std::initializer_list<const char*> names, const std::string& name) {
  return std::any_of(names.begin(), names.end(),
                     [&name](const char* candidate) { return name == candidate; });
}

}  // namespace

std::optional<std::string> CommandOptions::Value(const std::string& name) const {
  const auto found = values_.find(name);
  if (found == values_.end()) return std::nullopt;
  return found->second;
}

std::string CommandOptions::ValueOr(const std::string& name, const std::string& fallback) const {
  return Value(name).value_or(fallback);
}

absl::StatusOr<CommandOptions> ParseCommandOptions(
    int argc, char** argv, std::initializer_list<const char*> value_options,
    std::initializer_list<const char*> flags) {
  CommandOptions options;
  for (int index = 1; index < argc; ++index) {
    const std::string argument = argv[index];
    if (argument == "--help" || argument == "-h") {
      options.help_ = true;
      return options;
    }
  }
  for (int index = 1; index < argc; ++index) {
    const std::string argument = argv[index];
    if (Contains(flags, argument)) {
      options.flags_.insert(argument);
      continue;
    }
    std::string name = argument;
    std::optional<std::string> value;
    if (const size_t equals = argument.find('='); equals != std::string::npos) {
      name = argument.substr(0, equals);
      value = argument.substr(equals + 1);
    }
    if (!Contains(value_options, name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", argument, "'"));
    }
    if (!value.has_value()) {
      if (index + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      value = argv[++index];
    }
    options.values_[name] = *std::move(value);
  }
  return options;
}

int UsageError(absl::string_view command, absl::string_view message, const std::string& usage) {
  std::fprintf(stderr, "weightpath-agent %s: %s\n%s", std::string(command).c_str(),
               std::string(message).c_str(), usage.c_str());
  return kExitUsage;
}

void LogToStderr() {
  auto logger = spdlog::stderr_logger_mt("weightpath-agent");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
}

}  // namespace weightpath::agent
