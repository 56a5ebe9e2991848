// A real Prometheus (Debian's /usr/bin/prometheus) scraping the real
// weightpath-server: proves the exposition is accepted by the consumer that
// matters, and that what Prometheus stores equals the calls the test made.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"

namespace weightpath::server::testing {
namespace {

using ::weightpath::testing::SpawnOptions;
using ::weightpath::testing::Subprocess;

constexpr char kPrometheusBinary[] = "/usr/bin/prometheus";
// A loaded 2-core CI machine can take many seconds to open a TSDB.
constexpr absl::Duration kReadyTimeout = absl::Seconds(30);
// Several 1 s scrape intervals, with room for a slow machine.
constexpr absl::Duration kQueryTimeout = absl::Seconds(30);
constexpr absl::Duration kStopTimeout = absl::Seconds(10);
constexpr int kBindAttempts = 3;

// A port that was free a moment ago. Another process may take it before
// Prometheus binds it, which is why starting is retried.
absl::StatusOr<int> PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return absl::UnavailableError("cannot bind 127.0.0.1:0");
  }
  const int port = ntohs(address.sin_port);
  close(fd);
  return port;
}

std::string PercentEncode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  for (const unsigned char c : text) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded.push_back(static_cast<char>(c));
    } else {
      encoded.push_back('%');
      encoded.push_back(kHex[c >> 4]);
      encoded.push_back(kHex[c & 0xF]);
    }
  }
  return encoded;
}

struct Sample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Prometheus child process in its own temp dir (config, TSDB, log); stopped
// with SIGTERM (SIGKILL after kStopTimeout) and the dir removed when the
// object goes away, whether or not the test passed.
class PrometheusProcess {
 public:
  static absl::StatusOr<std::unique_ptr<PrometheusProcess>> Start(
      const std::string& scrape_target) {
    std::unique_ptr<PrometheusProcess> process(new PrometheusProcess());
    WriteFileOrDie(process->dir_.File("prometheus.yml"),
                   absl::StrCat("global:\n"
                                "  scrape_interval: 1s\n"
                                "  scrape_timeout: 1s\n"
                                "  evaluation_interval: 1s\n"
                                "scrape_configs:\n"
                                "  - job_name: weightpath\n"
                                "    static_configs:\n"
                                "      - targets: ['",
                                scrape_target, "']\n"));
    absl::Status last = absl::UnavailableError("prometheus was never started");
    for (int attempt = 0; attempt < kBindAttempts; ++attempt) {
      absl::StatusOr<int> port = PickFreePort();
      if (!port.ok()) return port.status();
      last = process->StartOnce(*port);
      if (last.ok()) return process;
    }
    return last;
  }

  ~PrometheusProcess() { Stop(); }
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;

  // Sends SIGTERM and waits; true when Prometheus exited by itself with 0.
  bool Stop() {
    if (process_ == nullptr) return true;
    const bool clean = process_->Terminate(kStopTimeout).exit_code == 0;
    process_.reset();
    return clean;
  }

  std::string Log() const { return ReadFileOrDie(dir_.File("prometheus.log")); }

  // Runs an instant query; the vector it returns (empty while no series
  // matches yet).
  absl::StatusOr<std::vector<Sample>> Query(const std::string& promql) const {
    absl::StatusOr<std::string> body =
        HttpGet(address_, "/api/v1/query?query=" + PercentEncode(promql));
    if (!body.ok()) return body.status();
    google::protobuf::Struct response;
    const auto parsed = google::protobuf::util::JsonStringToMessage(*body, &response);
    if (!parsed.ok()) {
      return absl::DataLossError(absl::StrCat("query response is not JSON: ", *body));
    }
    const auto& fields = response.fields();
    if (fields.count("status") == 0 || fields.at("status").string_value() != "success" ||
        fields.count("data") == 0) {
      return absl::FailedPreconditionError(absl::StrCat("query ", promql, " failed: ", *body));
    }
    const auto& data = fields.at("data").struct_value().fields();
    if (data.count("resultType") == 0 || data.at("resultType").string_value() != "vector" ||
        data.count("result") == 0) {
      return absl::DataLossError(absl::StrCat("query ", promql, " is not a vector: ", *body));
    }
    std::vector<Sample> samples;
    for (const google::protobuf::Value& entry : data.at("result").list_value().values()) {
      const auto& entry_fields = entry.struct_value().fields();
      if (entry_fields.count("metric") == 0 || entry_fields.count("value") == 0) {
        return absl::DataLossError(absl::StrCat("result entry lacks metric/value: ", *body));
      }
      Sample sample;
      for (const auto& [name, value] : entry_fields.at("metric").struct_value().fields()) {
        sample.labels[name] = value.string_value();
      }
      // "value" is [unix_time, "number as a string"].
      const auto& pair = entry_fields.at("value").list_value();
      if (pair.values_size() != 2 ||
          !absl::SimpleAtod(pair.values(1).string_value(), &sample.value)) {
        return absl::DataLossError(absl::StrCat("unparsable sample value: ", *body));
      }
      samples.push_back(std::move(sample));
    }
    return samples;
  }

  // Polls `promql` until it yields exactly one sample equal to `expected`;
  // the last value seen (or the error) on timeout.
  absl::Status WaitForValue(const std::string& promql, double expected) const {
    const absl::Time deadline = absl::Now() + kQueryTimeout;
    std::string last_seen = "no answer";
    while (absl::Now() < deadline) {
      absl::StatusOr<std::vector<Sample>> samples = Query(promql);
      if (!samples.ok()) {
        last_seen = samples.status().ToString();
      } else if (samples->size() == 1 && (*samples)[0].value == expected) {
        return absl::OkStatus();
      } else {
        last_seen = samples->empty() ? "no series"
                                     : absl::StrCat(samples->size(), " series, first value ",
                                                    (*samples)[0].value);
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return absl::DeadlineExceededError(
        absl::StrCat(promql, " never equalled ", expected, "; last: ", last_seen));
  }

 private:
  PrometheusProcess() = default;

  absl::Status StartOnce(int port) {
    address_ = absl::StrCat("127.0.0.1:", port);
    std::vector<std::string> args = {
        kPrometheusBinary,
        "--config.file=" + dir_.File("prometheus.yml"),
        "--storage.tsdb.path=" + dir_.File("data"),
        "--web.listen-address=" + address_,
        "--log.level=warn",
    };
    SpawnOptions options;
    options.stdout_path = dir_.File("prometheus.log");
    options.stderr_path = options.stdout_path;
    options.append = true;
    absl::StatusOr<std::unique_ptr<Subprocess>> process = Subprocess::Start(args, options);
    if (!process.ok()) return process.status();
    process_ = *std::move(process);
    const absl::Time deadline = absl::Now() + kReadyTimeout;
    while (absl::Now() < deadline) {
      if (process_->Poll().has_value()) {
        // Exited before becoming ready: most likely the port was taken.
        process_.reset();
        return absl::UnavailableError(
            absl::StrCat("prometheus on ", address_, " exited early; log:\n", Log()));
      }
      if (HttpGet(address_, "/-/ready").ok()) return absl::OkStatus();
      absl::SleepFor(absl::Milliseconds(100));
    }
    Stop();
    return absl::DeadlineExceededError(absl::StrCat("prometheus on ", address_, " not ready after ",
                                                    absl::FormatDuration(kReadyTimeout),
                                                    "; log:\n", Log()));
  }

  TempDir dir_;
  std::string address_;
  std::unique_ptr<Subprocess> process_;
};

class E2ePrometheusScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPrometheusBinary, X_OK) != 0) {
      GTEST_SKIP() << kPrometheusBinary << " is not installed (scripts/install-deps adds it)";
    }
    auto server = ServerProcess::Start({"--store=none"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto prometheus = PrometheusProcess::Start(server_->metrics_address());
    ASSERT_TRUE(prometheus.ok()) << prometheus.status();
    prometheus_ = *std::move(prometheus);
    stub_ = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
  }

  // Prometheus goes first so it never scrapes a server already gone.
  void TearDown() override {
    if (prometheus_ != nullptr) {
      EXPECT_TRUE(prometheus_->Stop()) << "prometheus did not stop cleanly on SIGTERM; log:\n"
                                       << prometheus_->Log();
    }
    prometheus_.reset();
    server_.reset();
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<PrometheusProcess> prometheus_;
  std::unique_ptr<v1::WeightPath::Stub> stub_;
};

TEST_F(E2ePrometheusScrapeTest, PrometheusStoresExactlyTheResolvesMade) {
  constexpr int kSpeedResolves = 4;     // x86 with AMX, default priority: w4a8-amx
  constexpr int kFidelityResolves = 2;  // same machine asking for fidelity: w4a16-tinygemm
  constexpr int kInvalidResolves = 1;   // no device_id: refused before any decision
  std::string policy_version;
  v1::ResolveWeightPathResponse response;
  for (int i = 0; i < kSpeedResolves; ++i) {
    const grpc::Status status = CallResolve(*stub_, AmxRequest(), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.weight_path().name(), "w4a8-amx");
    ASSERT_EQ(response.hardware_class(), "x86_cpu");
    policy_version = response.policy_version();
  }
  v1::ResolveWeightPathRequest fidelity = AmxRequest();
  fidelity.set_priority(v1::PRIORITY_FIDELITY);
  for (int i = 0; i < kFidelityResolves; ++i) {
    const grpc::Status status = CallResolve(*stub_, fidelity, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.weight_path().name(), "w4a16-tinygemm");
  }
  for (int i = 0; i < kInvalidResolves; ++i) {
    EXPECT_EQ(CallResolve(*stub_, AmxRequest(""), &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  ASSERT_FALSE(policy_version.empty());

  constexpr int kTotal = kSpeedResolves + kFidelityResolves + kInvalidResolves;
  // The total first: once it is right, one scrape after the last call has
  // been stored, so the per-label queries below need no further waiting.
  const absl::Status total_stored =
      prometheus_->WaitForValue("sum(weightpath_resolve_requests_total)", kTotal);
  ASSERT_TRUE(total_stored.ok()) << total_stored << "\nprometheus log:\n" << prometheus_->Log();

  const struct {
    std::string selector;
    int expected;
  } per_label[] = {
      {R"(weightpath_resolve_requests_total{hardware_class="x86_cpu",path="w4a8-amx",)"
       R"(priority="speed",code="OK"})",
       kSpeedResolves},
      {R"(weightpath_resolve_requests_total{hardware_class="x86_cpu",path="w4a16-tinygemm",)"
       R"(priority="fidelity",code="OK"})",
       kFidelityResolves},
      {R"(weightpath_resolve_requests_total{code="INVALID_ARGUMENT"})", kInvalidResolves},
      {R"(weightpath_resolve_duration_seconds_count)", kTotal},
      {R"(up{job="weightpath"})", 1},
  };
  for (const auto& [selector, expected] : per_label) {
    SCOPED_TRACE(selector);
    absl::StatusOr<std::vector<Sample>> samples = prometheus_->Query(selector);
    ASSERT_TRUE(samples.ok()) << samples.status();
    ASSERT_EQ(samples->size(), 1u);
    EXPECT_EQ((*samples)[0].value, expected);
  }

  absl::StatusOr<std::vector<Sample>> info = prometheus_->Query("weightpath_policy_info");
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->size(), 1u);
  EXPECT_EQ((*info)[0].labels["version"], policy_version);
  EXPECT_EQ((*info)[0].labels["job"], "weightpath");
  EXPECT_EQ((*info)[0].value, 1);
}

}  // namespace
}  // namespace weightpath::server::testing
