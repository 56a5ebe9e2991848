#include "agent/base/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weightpath::agent {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

// Runs `write_lines` with stderr pointed at a temporary file; returns what
// was written there.
template <typename Fn>
std::string CaptureStderr(Fn write_lines) {
  char path[] = "/tmp/wp-agent-log-XXXXXX";
  const int file = mkstemp(path);
  EXPECT_GE(file, 0);
  const int saved = dup(STDERR_FILENO);
  dup2(file, STDERR_FILENO);
  write_lines();
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string text;
  lseek(file, 0, SEEK_SET);
  char buffer[4096];
  for (ssize_t n; (n = read(file, buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  close(file);
  unlink(path);
  return text;
}

TEST(AgentLog, OneLinePerEventWithUtcTimeAndLevel) {
  const std::string text = CaptureStderr([] {
    log::Info("boot: {} of {}", 1, 2);
    log::Warn("retrying");
    log::Error("failed: {}", "why");
  });
  EXPECT_THAT(text, MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} "
                                 "info boot: 1 of 2\n"
                                 "[-0-9T:.]+ warning retrying\n"
                                 "[-0-9T:.]+ error failed: why\n"));
}

// A hostile server's rationale or a mirror's error text reaches these lines:
// it must not be able to start a forged line of its own.
TEST(AgentLog, ControlCharactersFromOutsideCannotForgeALine) {
  const std::string hostile = "w4a8-amx\n2026-01-01T00:00:00.000 info boot: verified\r\x1b[2J";
  const std::string text = CaptureStderr([&] { log::Warn("server said: {}", hostile); });
  EXPECT_THAT(text, HasSubstr("server said: w4a8-amx\\x0a2026-01-01T00:00:00.000 info boot: "
                              "verified\\x0d\\x1b[2J"));
  EXPECT_THAT(text, EndsWith("\n"));
  EXPECT_THAT(text.substr(0, text.size() - 1), Not(HasSubstr("\n")));
}

}  // namespace
}  // namespace weightpath::agent
