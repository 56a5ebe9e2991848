// Certificate renewals against the real binary, checked by real TLS
// handshakes: what `cat > tls.crt` and `acme.sh --install-cert` leave for a
// moment (an empty certificate or key), a certificate path turned into a
// symlink to /dev/zero, a directory or a FIFO, a new key written before its
// certificate, and a key that never matches. Each must leave the last good
// pair serving, be counted in weightpath_tls_reloads_total{result="error"}
// and logged naming the file; a good renewal after it is served, and
// SIGTERM still stops the server. Files are checked every second
// (--reload_interval=1s) and at SIGHUP, which the hostile shapes use.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/security/tls_material.h"
#include "tests/server/server_process.h"
#include "tests/server/test_ca.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTlsErrors[] = "weightpath_tls_reloads_total{result=\"error\"}";
constexpr char kTlsTaken[] = "weightpath_tls_reloads_total{result=\"success\"}";
constexpr char kTlsRefused[] = "weightpath_tls_files_refused";

// The serial of the first certificate in a PEM file, as the server logs it.
std::string SerialOf(const std::string& pem_path) {
  TlsPaths paths;
  paths.certificate = pem_path;
  paths.key = pem_path.substr(0, pem_path.size() - 4) + ".key";
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(paths);
  EXPECT_TRUE(material.ok()) << material.status();
  return material.ok() ? material->serial : "";
}

// One TLS handshake with `address` as a device would make it: the test CA
// trusted, the name localhost checked, h2 offered, and (for mutual TLS) the
// client certificate CLIENT.pem presented. The serial of the certificate
// the server presented, or why the handshake failed.
absl::StatusOr<std::string> Handshake(const TestCa& ca, const std::string& address,
                                         const std::string& client) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(address);
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket");
  struct SocketCloser {
    int fd;
    ~SocketCloser() { close(fd); }
  } closer{fd};
  // A wedged server fails the handshake instead of hanging the test.
  const struct timeval five_seconds = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &five_seconds, sizeof(five_seconds));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &five_seconds, sizeof(five_seconds));
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(port));
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof(peer)) != 0) {
    return absl::UnavailableError(absl::StrCat("connect ", address));
  }
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(SSL_CTX_new(TLS_client_method()),
                                                            &SSL_CTX_free);
  SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, nullptr);
  SSL_CTX_load_verify_locations(context.get(), ca.File("ca.pem").c_str(), nullptr);
  static const unsigned char kH2[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(context.get(), kH2, sizeof(kH2));
  if (!client.empty()) {
    SSL_CTX_use_certificate_chain_file(context.get(), ca.File(client + ".pem").c_str());
    SSL_CTX_use_PrivateKey_file(context.get(), ca.File(client + ".key").c_str(), SSL_FILETYPE_PEM);
  }
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(context.get()), &SSL_free);
  SSL_set_fd(ssl.get(), fd);
  SSL_set_tlsext_host_name(ssl.get(), "localhost");
  SSL_set1_host(ssl.get(), "localhost");
  ERR_clear_error();
  if (SSL_connect(ssl.get()) != 1) {
    char reason[256];
    ERR_error_string_n(ERR_get_error(), reason, sizeof(reason));
    ERR_clear_error();
    return absl::UnavailableError(absl::StrCat("handshake failed: ", reason));
  }
  std::unique_ptr<X509, decltype(&X509_free)> served(SSL_get1_peer_certificate(ssl.get()),
                                                     &X509_free);
  if (served == nullptr) return absl::InternalError("no peer certificate");
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(
      ASN1_INTEGER_to_BN(X509_get0_serialNumber(served.get()), nullptr), &BN_free);
  char* hex = BN_bn2hex(serial.get());
  std::string text(hex);
  OPENSSL_free(hex);
  SSL_shutdown(ssl.get());
  return text;
}

// The serial, or the error in words: what EXPECT_EQ shows on a mismatch.
std::string ServedSerial(const TestCa& ca, const std::string& address, const std::string& client) {
  absl::StatusOr<std::string> serial = Handshake(ca, address, client);
  return serial.ok() ? *serial : serial.status().ToString();
}

double Metric(const ServerProcess& server, const std::string& series) {
  absl::StatusOr<std::string> metrics = HttpGet(server.metrics_address(), "/metrics");
  if (!metrics.ok()) return -1;
  absl::StatusOr<double> value = SampleValue(*metrics, series);
  return value.ok() ? *value : -1;
}

// Waits (up to 10 s) until the counter reaches `at_least`.
bool WaitForCount(const ServerProcess& server, const std::string& series, double at_least) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (Metric(server, series) >= at_least) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

// As cert-manager and kubelet do: written beside, renamed over (a
// directory in the way is removed first).
void Replace(const std::string& path, const std::string& contents) {
  std::error_code ignored;
  if (std::filesystem::is_directory(std::filesystem::symlink_status(path))) {
    std::filesystem::remove_all(path, ignored);
  }
  WriteFileOrDie(path + ".new", contents);
  ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0) << path;
}

// What `cat new > tls.crt` does first: the same inode, cut to nothing.
void Truncate(const std::string& path) { WriteFileOrDie(path, ""); }

// Replaces whatever is at `path` (a file, a directory) by what `make`
// creates at `path`.
template <typename Make>
void ReplaceWith(const std::string& path, Make make) {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
  ASSERT_EQ(make(path.c_str()), 0) << path;
}

std::string PrivateDirectory(const std::string& log) {
  const std::string marker = "gRPC reads checked copies in ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  return log.substr(start, log.find_first_of("\n ", start) - start);
}

class ServerTlsReloadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto ca = TestCa::Create();
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = ca->release();
    ASSERT_TRUE(ca_->IssueServer("renewed").ok());
    ASSERT_TRUE(ca_->IssueServer("unrelated").ok());
    ASSERT_TRUE(ca_->IssueClient("device", "/CN=device-7").ok());
  }
  static void TearDownTestSuite() {
    delete ca_;
    ca_ = nullptr;
  }

  // The operator's files, copies of the CA's first server certificate.
  void SetUp() override {
    WriteFileOrDie(Path("tls.crt"), ReadFileOrDie(ca_->File("server.pem")));
    WriteFileOrDie(Path("tls.key"), ReadFileOrDie(ca_->File("server.key")));
    WriteFileOrDie(Path("ca.crt"), ReadFileOrDie(ca_->File("ca.pem")));
  }

  std::string Path(const std::string& name) const { return files_.File(name); }

  std::unique_ptr<ServerProcess> Start(bool mutual) {
    std::vector<std::string> args = {"--tls_cert=" + Path("tls.crt"),
                                     "--tls_key=" + Path("tls.key"), "--reload_interval=1s",
                                     "--shutdown_grace=2s"};
    if (mutual) args.push_back("--client_ca=" + Path("ca.crt"));
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(args);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  // gRPC re-reads the copies every second: the serial served once it
  // shows `serial` (a fresh connection each time), or after 5 s.
  static std::string AwaitServed(const ServerProcess& server, const std::string& serial,
                                 const std::string& client) {
    std::string served;
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    do {
      served = ServedSerial(*ca_, server.grpc_address(), client);
      if (served == serial) break;
      absl::SleepFor(absl::Milliseconds(100));
    } while (absl::Now() < deadline);
    return served;
  }

  static TestCa* ca_;
  TempDir files_;
};

TestCa* ServerTlsReloadTest::ca_ = nullptr;

// Each shape below crashed gRPC 1.51's own file watcher (SIGABRT on the
// empty certificate or key, /dev/zero, the directory) or wedged it for good
// (the FIFO, SIGTERM included).
TEST_F(ServerTlsReloadTest, HostileFilesLeaveTheLastGoodPairServingAndCounted) {
  auto server = Start(/*mutual=*/true);
  ASSERT_NE(server, nullptr);
  const std::string first = SerialOf(ca_->File("server.pem"));
  const std::string renewed = SerialOf(ca_->File("renewed.pem"));
  ASSERT_NE(first, renewed);
  ASSERT_EQ(ServedSerial(*ca_, server->grpc_address(), "device"), first);

  struct Step {
    std::string what;
    std::string file;
    std::function<void(const std::string&)> damage;
    std::string logged;  // why, as the log says it
  };
  const std::vector<Step> steps = {
      {"certificate emptied", "tls.crt", Truncate, "empty"},
      {"key emptied", "tls.key", Truncate, "empty"},
      {"certificate a symlink to /dev/zero", "tls.crt",
       [](const std::string& path) {
         ReplaceWith(path, [](const char* at) { return symlink("/dev/zero", at); });
       },
       "a character device, not a regular file"},
      {"certificate a directory", "tls.crt",
       [](const std::string& path) {
         ReplaceWith(path, [](const char* at) { return mkdir(at, 0700); });
       },
       "a directory, not a regular file"},
      {"client CA bundle emptied", "ca.crt", Truncate, "empty"},
      {"certificate a FIFO", "tls.crt",
       [](const std::string& path) {
         ReplaceWith(path, [](const char* at) { return mkfifo(at, 0600); });
       },
       "a FIFO, not a regular file"},
  };
  double errors = Metric(*server, kTlsErrors);
  ASSERT_EQ(errors, 0);
  for (const Step& step : steps) {
    SCOPED_TRACE(step.what);
    const std::string good = ReadFileOrDie(Path(step.file));
    step.damage(Path(step.file));
    // SIGHUP checks at once, as it reloads the policy: a second saved a step.
    server->Signal(SIGHUP);
    ASSERT_TRUE(WaitForCount(*server, kTlsErrors, errors + 1)) << server->Log();
    errors = Metric(*server, kTlsErrors);
    // gRPC re-reads its copies every second: a second more, and the pair
    // served is still the first.
    if (step.what == "certificate emptied") absl::SleepFor(absl::Seconds(1));
    EXPECT_EQ(ServedSerial(*ca_, server->grpc_address(), "device"), first);
    EXPECT_TRUE(server->Running());
    EXPECT_THAT(server->Log(), HasSubstr(absl::StrCat(Path(step.file), ": ", step.logged)));
    if (step.what == "certificate a FIFO") break;  // stays for the renewal below
    Replace(Path(step.file), good);
  }
  EXPECT_EQ(Metric(*server, kTlsTaken), 0) << "the same files back are no renewal";

  // A renewal after all that is served; the FIFO's place is taken by the
  // new certificate.
  const double taken = Metric(*server, kTlsTaken);
  Replace(Path("tls.key"), ReadFileOrDie(ca_->File("renewed.key")));
  Replace(Path("tls.crt"), ReadFileOrDie(ca_->File("renewed.pem")));
  server->Signal(SIGHUP);
  ASSERT_TRUE(WaitForCount(*server, kTlsTaken, taken + 1)) << server->Log();
  EXPECT_EQ(AwaitServed(*server, renewed, "device"), renewed) << server->Log();

  // A FIFO in the key's place when SIGTERM comes: the server still stops
  // within its grace and removes its copies of the key.
  errors = Metric(*server, kTlsErrors);
  ReplaceWith(Path("tls.key"), [](const char* at) { return mkfifo(at, 0600); });
  server->Signal(SIGHUP);
  ASSERT_TRUE(WaitForCount(*server, kTlsErrors, errors + 1));
  const std::string copies = PrivateDirectory(server->Log());
  ASSERT_FALSE(copies.empty()) << server->Log();
  EXPECT_TRUE(std::filesystem::exists(copies + "/current/key.pem"));
  const absl::Time sigterm = absl::Now();
  server->Signal(SIGTERM);
  const ExitResult exit = server->WaitForExit(absl::Seconds(15));
  EXPECT_EQ(exit.exit_code, 0) << exit.log;
  // The grace, up to 2 s more for the metrics listener to stop (its accept
  // loop polls every 2 s), and room for a loaded machine; gRPC's own
  // watcher on a FIFO never let the process end at all.
  EXPECT_LT(absl::Now() - sigterm, absl::Seconds(7)) << "--shutdown_grace=2s";
  EXPECT_FALSE(std::filesystem::exists(copies)) << copies;
}

// A key written before its certificate (a renewal in two writes, seconds
// apart), after a key that matches nothing at all: the pair in use serves
// every handshake until the files match again, then the new certificate is
// served and the expiry gauge follows it.
TEST_F(ServerTlsReloadTest, AKeyThatDoesNotMatchIsRefusedOnceAndTheOldPairServes) {
  auto server = Start(/*mutual=*/false);
  ASSERT_NE(server, nullptr);
  const std::string first = SerialOf(ca_->File("server.pem"));
  const std::string renewed = SerialOf(ca_->File("renewed.pem"));
  ASSERT_EQ(ServedSerial(*ca_, server->grpc_address(), ""), first);

  Replace(Path("tls.key"), ReadFileOrDie(ca_->File("unrelated.key")));
  server->Signal(SIGHUP);
  ASSERT_TRUE(WaitForCount(*server, kTlsErrors, 1)) << server->Log();
  const std::string refusal = absl::StrCat("--tls_key: ", Path("tls.key"),
                                           ": does not match the certificate in --tls_cert=",
                                           Path("tls.crt"));
  // Logged and counted once for the change, not once a second.
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_EQ(Metric(*server, kTlsErrors), 1);
  EXPECT_EQ(Metric(*server, kTlsRefused), 1);
  std::string log = server->Log();
  EXPECT_EQ(log.find(refusal), log.rfind(refusal)) << log;
  EXPECT_NE(log.find(refusal), std::string::npos) << log;
  EXPECT_EQ(ServedSerial(*ca_, server->grpc_address(), ""), first);

  // The renewal's key, two seconds before its certificate.
  Replace(Path("tls.key"), ReadFileOrDie(ca_->File("renewed.key")));
  ASSERT_TRUE(WaitForCount(*server, kTlsErrors, 2)) << server->Log();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ServedSerial(*ca_, server->grpc_address(), ""), first) << i;
    absl::SleepFor(absl::Milliseconds(300));
  }
  EXPECT_EQ(Metric(*server, kTlsTaken), 0);
  Replace(Path("tls.crt"), ReadFileOrDie(ca_->File("renewed.pem")));
  ASSERT_TRUE(WaitForCount(*server, kTlsTaken, 1)) << server->Log();
  EXPECT_EQ(Metric(*server, kTlsRefused), 0);
  EXPECT_EQ(AwaitServed(*server, renewed, ""), renewed) << server->Log();

  // The gauge describes the certificate served: the renewed one.
  TlsPaths paths{ca_->File("renewed.pem"), ca_->File("renewed.key"), ""};
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(paths);
  ASSERT_TRUE(material.ok()) << material.status();
  EXPECT_NEAR(Metric(*server,
                     "weightpath_tls_certificate_expiry_timestamp_seconds{certificate=\"server\"}"),
              absl::ToDoubleSeconds(material->not_after - absl::UnixEpoch()), 0.5);
}

// At start nothing is served yet, so a file that would be refused on
// renewal stops the start instead, naming its flag.
TEST_F(ServerTlsReloadTest, UnusableFilesAtStartStopItNamingTheFlag) {
  Replace(Path("tls.key"), ReadFileOrDie(ca_->File("unrelated.key")));
  ExitResult result = ServerProcess::RunToExit(
      {"--tls_cert=" + Path("tls.crt"), "--tls_key=" + Path("tls.key")}, absl::Seconds(30));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.log, HasSubstr(absl::StrCat("--tls_key: ", Path("tls.key"),
                                                 ": does not match the certificate")));
  Truncate(Path("tls.crt"));
  result = ServerProcess::RunToExit(
      {"--tls_cert=" + Path("tls.crt"), "--tls_key=" + Path("tls.key")}, absl::Seconds(30));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.log, HasSubstr(absl::StrCat("--tls_cert: ", Path("tls.crt"), ": empty")));
}

// A server killed before it could clean up leaves its copies of the key;
// the next server to start removes them.
TEST_F(ServerTlsReloadTest, CopiesLeftByAKilledServerAreRemovedByTheNext) {
  auto killed = Start(/*mutual=*/false);
  ASSERT_NE(killed, nullptr);
  const std::string copies = PrivateDirectory(killed->Log());
  ASSERT_FALSE(copies.empty()) << killed->Log();
  struct stat info;
  ASSERT_EQ(stat(copies.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((copies + "/current/key.pem").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  killed->Signal(SIGKILL);
  killed->WaitForExit(absl::Seconds(10));
  ASSERT_TRUE(std::filesystem::exists(copies));
  auto next = Start(/*mutual=*/false);
  ASSERT_NE(next, nullptr);
  EXPECT_FALSE(std::filesystem::exists(copies));
  EXPECT_THAT(next->Log(), HasSubstr(absl::StrCat("removed ", copies)));
  EXPECT_THAT(PrivateDirectory(next->Log()), Not(copies));
}

}  // namespace
}  // namespace weightpath::server::testing
