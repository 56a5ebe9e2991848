// The agent's log: one line per event on stderr, which systemd hands to the
// journal. "2026-12-01T23:41:45.360 info boot: ..." (UTC, milliseconds).
//
// Written here rather than with spdlog: a boot logs a few dozen lines, and
// spdlog's shared library alone was 0.5 MiB of the agent's resident pages on
// every boot (bench/RESULTS-agent-trust.md). Messages carry text from the
// server, the mirror and local files, so control characters in them are
// escaped (common/control_characters.h): a hostile answer cannot start a log
// line of its own.
#pragma once

#include <string_view>
#include <utility>

#include "fmt/format.h"

namespace weightpath::agent::log {

enum class Level { kInfo, kWarn, kError };

// Writes one whole line with a single write(2), so lines from several
// threads never interleave.
void Write(Level level, std::string_view message);

template <typename... Args>
void Info(fmt::format_string<Args...> format, Args&&... args) {
  Write(Level::kInfo, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
void Warn(fmt::format_string<Args...> format, Args&&... args) {
  Write(Level::kWarn, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
void Error(fmt::format_string<Args...> format, Args&&... args) {
  Write(Level::kError, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace weightpath::agent::log
