// Log injection against the real binary: a request whose model, label key
// or profile.arch carries a newline and a fake log line after it must leave
// exactly one line in the server's log, with the newline escaped, in both
// log formats.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::StartsWith;

// What an attacker appends after the newline: a line that would pass for the
// server's own.
std::string Forged(const std::string& marker) {
  return "\n2026-01-01T00:00:00.000000 I reloaded: policy " + marker + " forged";
}

std::vector<std::string> LinesWith(const std::string& log, const std::string& marker) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, marker)) lines.emplace_back(line);
  }
  return lines;
}

// Sends the three hostile requests; each is refused and logged once.
void SendHostileRequests(const ServerProcess& server) {
  auto stub = v1::WeightPath::NewStub(PlaintextChannel(server.grpc_address()));
  v1::ResolveWeightPathResponse response;

  v1::ResolveWeightPathRequest model = AmxRequest("device-model");
  model.set_model("no-such-model" + Forged("MARK-MODEL"));
  EXPECT_FALSE(CallResolve(*stub, model, &response).ok());

  v1::ResolveWeightPathRequest label = AmxRequest("device-label");
  // An over-long value makes the refusal quote the key.
  (*label.mutable_labels())["tier" + Forged("MARK-LABEL")] = std::string(300, 'v');
  EXPECT_FALSE(CallResolve(*stub, label, &response).ok());

  v1::ResolveWeightPathRequest arch = AmxRequest("device-arch");
  arch.mutable_profile()->set_arch("sparc64" + Forged("MARK-ARCH"));
  EXPECT_FALSE(CallResolve(*stub, arch, &response).ok());
}

TEST(ServerLogInjectionTest, NewlinesInRequestFieldsStayOnOneTextLogLine) {
  auto server = ServerProcess::Start({"--store=none"});
  ASSERT_TRUE(server.ok()) << server.status();
  SendHostileRequests(**server);
  const std::string log = (*server)->Log();
  for (const std::string marker : {"MARK-MODEL", "MARK-LABEL", "MARK-ARCH"}) {
    SCOPED_TRACE(marker);
    const std::vector<std::string> lines = LinesWith(log, marker);
    ASSERT_THAT(lines, SizeIs(1)) << log;
    // The server's own line, the device's newline shown as \x0a inside it.
    EXPECT_THAT(lines[0], HasSubstr("refused"));
    EXPECT_THAT(lines[0], HasSubstr("\\x0a2026-01-01T00:00:00.000000 I reloaded: policy"));
    EXPECT_THAT(lines[0], ::testing::Not(StartsWith("2026-01-01T00:00:00.000000")));
  }
  // No line of the log begins with the forged text.
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    EXPECT_FALSE(absl::StartsWith(line, "2026-01-01T00:00:00.000000 I reloaded")) << line;
  }
}

TEST(ServerLogInjectionTest, NewlinesInRequestFieldsStayOnOneJsonLogLine) {
  auto server = ServerProcess::Start({"--store=none", "--log_format=json"});
  ASSERT_TRUE(server.ok()) << server.status();
  SendHostileRequests(**server);
  const std::string log = (*server)->Log();
  for (const std::string marker : {"MARK-MODEL", "MARK-LABEL", "MARK-ARCH"}) {
    SCOPED_TRACE(marker);
    const std::vector<std::string> lines = LinesWith(log, marker);
    ASSERT_THAT(lines, SizeIs(1)) << log;
    EXPECT_THAT(lines[0], StartsWith("{\"time\":"));
    EXPECT_THAT(lines[0], HasSubstr("\\n2026-01-01T00:00:00.000000 I reloaded: policy"));
  }
}

}  // namespace
}  // namespace weightpath::server::testing
