#include "tests/helm/server_flags.h"

#include <cstdio>
#include <iterator>
#include <regex>

#include "absl/strings/str_cat.h"

namespace weightpath::helm_test {

absl::StatusOr<std::map<std::string, std::string>> ServerFlagDefaults(const std::string& binary) {
  const std::string command = absl::StrCat("'", binary, "' --helpfull 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot run ", binary));
  std::string help;
  char buffer[4096];
  size_t read = 0;
  while ((read = fread(buffer, 1, sizeof(buffer), pipe)) > 0) help.append(buffer, read);
  pclose(pipe);  // absl exits non-zero after printing help; the text is what counts

  // absl prints "--name (description); default: VALUE;", wrapping lines
  // anywhere, including between "();" and "default:".
  static const std::regex kFlagEntry(
      R"re(\n\s+--(\w+) \([\s\S]*?\);\s+default: ("([^"]*)"|[^;]*);)re");
  std::map<std::string, std::string> defaults;
  for (std::sregex_iterator it(help.begin(), help.end(), kFlagEntry), end; it != end; ++it) {
    const std::smatch& entry = *it;
    defaults[entry[1].str()] = entry[3].matched ? entry[3].str() : entry[2].str();
  }
  if (defaults.empty()) {
    return absl::InternalError(absl::StrCat(binary, " --helpfull printed no flags: ", help));
  }
  // Every entry must have parsed on its own: a missed one would be swallowed
  // silently into its neighbour's description.
  static const std::regex kFlagStart(R"re(\n\s+--\w+ \()re");
  const auto starts = std::distance(std::sregex_iterator(help.begin(), help.end(), kFlagStart),
                                    std::sregex_iterator());
  if (starts != static_cast<long>(defaults.size())) {
    return absl::InternalError(absl::StrCat(binary, " --helpfull lists ", starts,
                                            " flags but only ", defaults.size(), " parsed"));
  }
  return defaults;
}

}  // namespace weightpath::helm_test
