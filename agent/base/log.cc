#include "agent/base/log.h"

#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/control_characters.h"

namespace weightpath::agent::log {
namespace {

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "info";
}

}  // namespace

void Write(Level level, std::string_view message) {
  std::string line =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3S ", absl::Now(), absl::UTCTimeZone());
  line.append(LevelName(level));
  line.push_back(' ');
  AppendControlEscaped(absl::string_view(message.data(), message.size()), &line);
  line.push_back('\n');
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (written < 0 && errno == EINTR) continue;
    // A closed or full stderr must not stop a boot: the line is dropped.
    if (written <= 0) return;
    rest.remove_prefix(static_cast<size_t>(written));
  }
}

}  // namespace weightpath::agent::log
