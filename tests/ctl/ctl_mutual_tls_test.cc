// weightpathctl against the real weightpath-server under mutual TLS, as an
// operator reaches it through kubectl port-forward: an operator certificate
// dry-runs a resolve without a device identity (and records nothing); a
// device certificate still resolves only as itself; a missing client
// certificate, or TLS left out, is named with the flags that supply it; and
// --tls-server-name checks the server's certificate against the name it
// carries when the address dialled is not one.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/server/test_ca.h"
#include "tests/support/subprocess.h"

namespace weightpath::server::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using weightpath::testing::ProcessResult;
using weightpath::testing::RunProcess;

// The only name the server's certificate carries, as a chart's Service name.
constexpr char kServiceName[] = "wp-weightpath.fleet.svc";

class CtlMutualTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto ca = TestCa::Create();
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = ca->release();
    ASSERT_TRUE(ca_->IssueServer("service", absl::StrCat("DNS:", kServiceName)).ok());
    ASSERT_TRUE(ca_->IssueClient("operator", "/CN=alice/OU=weightpath-viewers").ok());
    ASSERT_TRUE(ca_->IssueClient("device", "/CN=amx-1/OU=devices").ok());
  }
  static void TearDownTestSuite() {
    delete ca_;
    ca_ = nullptr;
  }

  void SetUp() override {
    // A viewer is enough: a dry run reads what ExplainDecision would.
    WriteFileOrDie(data_.File("server.yaml"),
                   "operators:\n"
                   "  - {name: alice, role: viewer, certificate: \"ou=weightpath-viewers\"}\n");
    auto started = ServerProcess::Start(
        {"--tls_cert=" + ca_->File("service.pem"), "--tls_key=" + ca_->File("service.key"),
         "--client_ca=" + ca_->File("ca.pem"), "--config=" + data_.File("server.yaml"),
         "--store=sqlite:" + data_.File("fleet.db"), "--fleet_refresh_interval=100ms"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  // weightpathctl COMMAND --server ... with `tls` (the TLS flags) and `args`.
  ProcessResult Ctl(const std::vector<std::string>& command, const std::vector<std::string>& tls,
                    const std::vector<std::string>& args = {}) const {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH};
    argv.insert(argv.end(), command.begin(), command.end());
    argv.insert(argv.end(), {"--server", server_->grpc_address()});
    argv.insert(argv.end(), tls.begin(), tls.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }

  static std::vector<std::string> As(const std::string& client) {
    std::vector<std::string> flags = {"--ca", ca_->File("ca.pem"), "--tls-server-name",
                                      kServiceName};
    if (!client.empty()) {
      flags.insert(flags.end(), {"--cert", ca_->File(client + ".pem"), "--key",
                                 ca_->File(client + ".key")});
    }
    return flags;
  }

  static std::vector<std::string> Profile() {
    return {"--profile", absl::StrCat(WEIGHTPATH_EXAMPLE_PROFILES_DIR, "/intel-sapphire-rapids.json")};
  }

  static TestCa* ca_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
};

TestCa* CtlMutualTlsTest::ca_ = nullptr;

TEST_F(CtlMutualTlsTest, AnOperatorCertificateDryRunsAResolveWithoutADeviceIdentity) {
  ProcessResult dry_run = Ctl({"resolve"}, As("operator"), Profile());
  ASSERT_EQ(dry_run.exit_code, 0) << dry_run.err;
  EXPECT_THAT(dry_run.out, HasSubstr("w4a8-amx"));
  // As a device, still a dry run: what it would get, recorded for no one.
  ProcessResult as_device = Ctl({"resolve"}, As("operator"),
                                {"--profile", Profile()[1], "--device-id", "amx-1", "--dry-run"});
  EXPECT_EQ(as_device.exit_code, 0) << as_device.err;
  // A resolve that would be recorded is a device's own: refused.
  ProcessResult recorded = Ctl({"resolve"}, As("operator"),
                               {"--profile", Profile()[1], "--device-id", "amx-1"});
  EXPECT_EQ(recorded.exit_code, 1);
  EXPECT_THAT(recorded.err, AllOf(HasSubstr("PERMISSION_DENIED"),
                                  HasSubstr("device_id \"amx-1\" does not match")));

  // A device certificate resolves as itself, and dry-runs only as itself.
  ProcessResult own = Ctl({"resolve"}, As("device"),
                          {"--profile", Profile()[1], "--device-id", "amx-1"});
  EXPECT_EQ(own.exit_code, 0) << own.err;
  ProcessResult device_dry_run = Ctl({"resolve"}, As("device"), Profile());
  EXPECT_EQ(device_dry_run.exit_code, 1);
  EXPECT_THAT(device_dry_run.err,
              AllOf(HasSubstr("device_id \"weightpathctl\" does not match"),
                    HasSubstr("a dry run is also answered for an operator certificate")));

  // Only the device's own resolve reached the registry.
  ASSERT_TRUE(Eventually([&] {
    return Ctl({"devices"}, As("operator"), {"-o", "json"}).out.find("amx-1") != std::string::npos;
  }));
  ProcessResult devices = Ctl({"devices"}, As("operator"), {"-o", "json"});
  EXPECT_THAT(devices.out, Not(HasSubstr("weightpathctl")));
}

TEST_F(CtlMutualTlsTest, AMissingClientCertificateOrTlsIsNamedWithItsFlags) {
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"resolve", "--profile", Profile()[1]},
        std::vector<std::string>{"devices"}}) {
    ProcessResult no_certificate = Ctl(command, As(""));
    EXPECT_EQ(no_certificate.exit_code, 1) << command[0];
    EXPECT_THAT(no_certificate.err,
                AllOf(HasSubstr("UNAVAILABLE"),
                      HasSubstr("it most likely requires a client certificate, mutual TLS; give "
                                "--cert and --key")))
        << command[0];
    ProcessResult plaintext = Ctl(command, {});
    EXPECT_EQ(plaintext.exit_code, 1) << command[0];
    EXPECT_THAT(plaintext.err, HasSubstr("if it serves TLS, give --ca")) << command[0];
  }
  // A certificate the server takes: no such note on a refusal of another kind.
  ProcessResult refused = Ctl({"summary"}, As("device"));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, AllOf(HasSubstr("PERMISSION_DENIED"), Not(HasSubstr("--cert"))));
}

TEST_F(CtlMutualTlsTest, TheServerNameFlagChecksTheCertificateAgainstThatName) {
  // 127.0.0.1 is not a name the certificate carries.
  std::vector<std::string> dialled = {"--ca", ca_->File("ca.pem"), "--cert",
                                      ca_->File("operator.pem"), "--key", ca_->File("operator.key")};
  ProcessResult mismatch = Ctl({"summary"}, dialled);
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_THAT(mismatch.err, HasSubstr("UNAVAILABLE"));
  dialled.insert(dialled.end(), {"--tls-server-name", kServiceName});
  ProcessResult named = Ctl({"summary"}, dialled);
  EXPECT_EQ(named.exit_code, 0) << named.err;

  // It names a certificate, so it needs TLS.
  ProcessResult plaintext = Ctl({"summary"}, {"--tls-server-name", kServiceName});
  EXPECT_EQ(plaintext.exit_code, 2);
  EXPECT_THAT(plaintext.err, HasSubstr("--tls-server-name names the server's certificate, but the "
                                       "connection is plaintext"));
}

}  // namespace
}  // namespace weightpath::server::testing
