// Starting and stopping the real binary: graceful SIGTERM under load,
// refusing unsafe or broken configurations with a clear message, log format.
#include <signal.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "tests/support/subprocess.h"
#include "gtest/gtest.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kExitTimeout = absl::Seconds(30);

TEST(ServerLifecycleTest, SigtermDuringLoadLetsCallsFinishAndExitsZero) {
  // At debug level the server logs one line per call its handler answered;
  // each of those must reach the client as OK, none cut off by the shutdown.
  auto server = ServerProcess::Start({"--shutdown_grace=10s", "--log_level=debug"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = PlaintextChannel((*server)->grpc_address());
  std::atomic<bool> stop{false};
  std::atomic<int> ok_calls{0};
  std::atomic<int> never_started_calls{0};
  std::atomic<int> other_failures{0};
  absl::Mutex failures_mutex;
  std::vector<std::string> failure_messages;
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&] {
      auto stub = v1::WeightPath::NewStub(channel);
      const v1::ResolveWeightPathRequest request = AmxRequest("draining-device");
      while (!stop) {
        v1::ResolveWeightPathResponse response;
        const grpc::Status status = CallResolve(*stub, request, &response);
        if (status.ok()) {
          ++ok_calls;
        } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                   status.error_code() == grpc::StatusCode::CANCELLED) {
          // Sent as the listener closed; the log count below shows whether
          // the handler had taken any of them.
          ++never_started_calls;
        } else {
          ++other_failures;
          absl::MutexLock lock(&failures_mutex);
          failure_messages.push_back(
              absl::StrCat(status.error_code(), ": ", status.error_message()));
        }
      }
    });
  }
  while (ok_calls < 200) absl::SleepFor(absl::Milliseconds(5));
  (*server)->Signal(SIGTERM);
  const ExitResult exit = (*server)->WaitForExit(kExitTimeout);
  stop = true;
  for (std::thread& client : clients) client.join();

  EXPECT_EQ(exit.signal, 0);
  EXPECT_EQ(exit.exit_code, 0) << exit.log;
  EXPECT_EQ(other_failures, 0) << absl::StrJoin(failure_messages, "\n");
  int answered_by_handler = 0;
  for (absl::string_view line : absl::StrSplit(exit.log, '\n')) {
    if (absl::StrContains(line, "ResolveWeightPath device_id=draining-device class=")) {
      ++answered_by_handler;
    }
  }
  EXPECT_EQ(answered_by_handler, ok_calls.load());
  EXPECT_GE(ok_calls, 200);
  EXPECT_THAT(exit.log, HasSubstr("SIGTERM: shutting down"));
  EXPECT_THAT(exit.log, HasSubstr("stopped"));
}

TEST(ServerLifecycleTest, SigintTakesTheSameGracefulPath) {
  auto server = ServerProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Signal(SIGINT);
  const ExitResult exit = (*server)->WaitForExit(kExitTimeout);
  EXPECT_EQ(exit.exit_code, 0) << exit.log;
  EXPECT_THAT(exit.log, HasSubstr("SIGINT: shutting down"));
}

TEST(ServerLifecycleTest, NonLoopbackPlaintextWithoutInsecureRefusesToStart) {
  const ExitResult exit = ServerProcess::RunToExit(
      {"--listen=0.0.0.0:0", "--metrics_listen=127.0.0.1:0"}, kExitTimeout);
  EXPECT_EQ(exit.exit_code, 1);
  EXPECT_THAT(exit.log, HasSubstr("--listen=0.0.0.0:0 is not a loopback address"));
  EXPECT_THAT(exit.log, HasSubstr("--insecure"));
}

TEST(ServerLifecycleTest, NonLoopbackPlaintextWithInsecureStartsAndWarns) {
  auto server = ServerProcess::Start({"--listen=0.0.0.0:0", "--insecure"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Log(), HasSubstr("--insecure: serving plaintext gRPC"));
}

TEST(ServerLifecycleTest, BrokenConfigurationsNameWhatIsWrong) {
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string log_has;
  };
  const std::vector<Case> cases = {
      {{"--log_format=xml"}, 2, "--log_format=\"xml\" must be text or json"},
      {{"--tls_cert=/nonexistent.pem"}, 2, "--tls_cert and --tls_key must be given together"},
      {{"--policy=/nonexistent/policy.yaml", "--listen=127.0.0.1:0",
        "--metrics_listen=127.0.0.1:0"},
       1, "/nonexistent/policy.yaml"},
      {{"--catalog=/nonexistent/catalog.yaml", "--listen=127.0.0.1:0",
        "--metrics_listen=127.0.0.1:0"},
       1, "/nonexistent/catalog.yaml"},
      {{"--metrics_listen=256.1.1.1:1", "--listen=127.0.0.1:0"}, 1, "--metrics_listen"},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.args.front());
    const ExitResult exit = ServerProcess::RunToExit(test_case.args, kExitTimeout);
    EXPECT_EQ(exit.exit_code, test_case.exit_code) << exit.log;
    EXPECT_THAT(exit.log, HasSubstr(test_case.log_has));
  }
}

TEST(ServerLifecycleTest, JsonLogFormatWritesOneObjectPerLine) {
  auto server = ServerProcess::Start({"--log_format=json"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::WeightPath::NewStub(PlaintextChannel((*server)->grpc_address()));
  v1::ResolveWeightPathResponse response;
  // A refused request logs its field, with quotes that must be escaped.
  CallResolve(*stub, AmxRequest("bad \"id\""), &response);
  (*server)->Signal(SIGTERM);
  const ExitResult exit = (*server)->WaitForExit(kExitTimeout);
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(exit.log, '\n', absl::SkipEmpty())) {
    ++lines;
    EXPECT_TRUE(absl::StartsWith(line, "{\"time\":\"") && absl::EndsWith(line, "\"}")) << line;
  }
  EXPECT_GE(lines, 3);
  EXPECT_THAT(exit.log, HasSubstr("\"level\":\"warning\""));
  EXPECT_THAT(exit.log, HasSubstr("device_id has a character outside"));
}

TEST(ServerHelpTest, HelpListsTheServersFlags) {
  const ::weightpath::testing::ProcessResult help =
      ::weightpath::testing::RunProcess({WEIGHTPATH_SERVER_BINARY, "--help"});
  const std::string text = help.out + help.err;
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("No flags matched")));
  for (const char* flag : {"--listen", "--metrics_listen", "--policy", "--catalog", "--store",
                           "--admin_token_file", "--tls_cert", "--shutdown_grace"}) {
    EXPECT_THAT(text, ::testing::HasSubstr(flag));
  }
}

}  // namespace
}  // namespace weightpath::server::testing
