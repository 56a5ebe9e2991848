// A real Prometheus (Debian's /usr/bin/prometheus) scraping the real
// weightpath-server: proves the exposition is accepted by the consumer that
// matters, and that what Prometheus stores equals the calls the test made.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"
#include "yaml-cpp/yaml.h"

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
  // `rules_file`, when given, is loaded as a rule_files entry.
  static absl::StatusOr<std::unique_ptr<PrometheusProcess>> Start(
      const std::string& scrape_target, const std::string& rules_file = "") {
    std::unique_ptr<PrometheusProcess> process(new PrometheusProcess());
    WriteFileOrDie(process->dir_.File("prometheus.yml"),
                   absl::StrCat("global:\n"
                                "  scrape_interval: 1s\n"
                                "  scrape_timeout: 1s\n"
                                "  evaluation_interval: 1s\n",
                                rules_file.empty() ? "" : "rule_files:\n  - '" + rules_file + "'\n",
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

  // GETs an API path; its "data" object, or an error unless "status" is
  // "success".
  absl::StatusOr<google::protobuf::Struct> ApiData(const std::string& path) const {
    absl::StatusOr<std::string> body = HttpGet(address_, path);
    if (!body.ok()) return body.status();
    google::protobuf::Struct response;
    const auto parsed = google::protobuf::util::JsonStringToMessage(*body, &response);
    if (!parsed.ok()) {
      return absl::DataLossError(absl::StrCat(path, ": response is not JSON: ", *body));
    }
    const auto& fields = response.fields();
    if (fields.count("status") == 0 || fields.at("status").string_value() != "success" ||
        fields.count("data") == 0) {
      return absl::FailedPreconditionError(absl::StrCat(path, " failed: ", *body));
    }
    return fields.at("data").struct_value();
  }

  // Runs an instant query; the vector it returns (empty while no series
  // matches yet).
  absl::StatusOr<std::vector<Sample>> Query(const std::string& promql) const {
    absl::StatusOr<google::protobuf::Struct> answer =
        ApiData("/api/v1/query?query=" + PercentEncode(promql));
    if (!answer.ok()) return answer.status();
    const std::string body = absl::StrCat(promql, ": ", answer->DebugString());
    const auto& data = answer->fields();
    if (data.count("resultType") == 0 || data.at("resultType").string_value() != "vector" ||
        data.count("result") == 0) {
      return absl::DataLossError(absl::StrCat("query is not a vector: ", body));
    }
    std::vector<Sample> samples;
    for (const google::protobuf::Value& entry : data.at("result").list_value().values()) {
      const auto& entry_fields = entry.struct_value().fields();
      if (entry_fields.count("metric") == 0 || entry_fields.count("value") == 0) {
        return absl::DataLossError(absl::StrCat("result entry lacks metric/value: ", body));
      }
      Sample sample;
      for (const auto& [name, value] : entry_fields.at("metric").struct_value().fields()) {
        sample.labels[name] = value.string_value();
      }
      // "value" is [unix_time, "number as a string"].
      const auto& pair = entry_fields.at("value").list_value();
      // Prometheus writes NaN (0/0, a quantile of no calls) as "NaN".
      const std::string number = pair.values_size() == 2 ? pair.values(1).string_value() : "";
      if (number == "NaN") {
        sample.value = std::numeric_limits<double>::quiet_NaN();
      } else if (pair.values_size() != 2 || !absl::SimpleAtod(number, &sample.value)) {
        return absl::DataLossError(absl::StrCat("unparsable sample value: ", body));
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

// The expressions of deploy/prometheus/weightpath-dashboard.json, with
// Grafana's range variables given values that suit 1 s scrapes.
std::vector<std::string> DashboardExpressions() {
  google::protobuf::Struct dashboard;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      ReadFileOrDie(std::string(WEIGHTPATH_SOURCE_DIR) + "/deploy/prometheus/weightpath-dashboard.json"),
      &dashboard);
  EXPECT_TRUE(parsed.ok()) << parsed.message();
  std::vector<std::string> expressions;
  for (const google::protobuf::Value& panel : dashboard.fields().at("panels").list_value().values()) {
    const auto& fields = panel.struct_value().fields();
    if (fields.count("targets") == 0) continue;
    for (const google::protobuf::Value& target : fields.at("targets").list_value().values()) {
      std::string expr = target.struct_value().fields().at("expr").string_value();
      expr = absl::StrReplaceAll(expr, {{"$__rate_interval", "10s"}, {"$__range", "5m"}});
      expressions.push_back(std::move(expr));
    }
  }
  return expressions;
}

// A server with a fleet store, a rollout, measurements, outcomes and a
// refused policy edit, scraped by a Prometheus that loads the alert rules.
class E2ePrometheusPackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPrometheusBinary, X_OK) != 0) {
      GTEST_SKIP() << kPrometheusBinary << " is not installed (scripts/install-deps adds it)";
    }
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    WriteFileOrDie(dir_.File("policy.yaml"),
                   ReadFileOrDie(std::string(WEIGHTPATH_SOURCE_DIR) + "/policy/default_policy.yaml"));
    auto server = ServerProcess::Start({"--store=sqlite:" + dir_.File("fleet.db"),
                                        "--policy=" + dir_.File("policy.yaml"),
                                        "--admin_token_file=" + dir_.File("token"),
                                        "--fleet_refresh_interval=200ms",
                                        "--devices_seen_refresh_interval=1s",
                                        "--reload_interval=200ms"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto prometheus = PrometheusProcess::Start(server_->metrics_address(), RulesFile());
    ASSERT_TRUE(prometheus.ok()) << prometheus.status();
    prometheus_ = *std::move(prometheus);
  }

  // The rules file Prometheus loads.
  virtual std::string RulesFile() {
    return std::string(WEIGHTPATH_SOURCE_DIR) + "/deploy/prometheus/weightpath-rules.yaml";
  }

  void TearDown() override {
    if (prometheus_ != nullptr) prometheus_->Stop();
    prometheus_.reset();
    server_.reset();
  }

  // Device traffic and operator calls that give every panel a series.
  void MakeTraffic() {
    auto channel = PlaintextChannel(server_->grpc_address());
    auto stub = v1::WeightPath::NewStub(channel);
    auto admin = v1::FleetAdmin::NewStub(channel);
    v1::ResolveWeightPathResponse response;
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(CallResolve(*stub, AmxRequest(absl::StrCat("amx-", i)), &response).ok());
      ASSERT_TRUE(CallResolve(*stub, ArmRequest(absl::StrCat("arm-", i)), &response).ok());
    }
    EXPECT_EQ(CallResolve(*stub, AmxRequest(""), &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);

    v1::CreateRolloutRequest create;
    v1::Rollout* rollout = create.mutable_rollout();
    rollout->set_id("fidelity-agentic");
    (*rollout->mutable_selector()->mutable_match_labels())["workload"] = "agentic";
    rollout->mutable_action()->set_set_priority(v1::PRIORITY_FIDELITY);
    for (uint32_t percent : {10u, 100u}) {
      v1::RolloutStage* stage = rollout->add_stages();
      stage->set_percent(percent);
      stage->set_min_bake_seconds(600);
      stage->set_min_reporting_devices(1);
      stage->set_report_timeout_seconds(1800);
    }
    rollout->mutable_gates()->set_max_task_failure_delta(0.1);
    v1::Rollout created;
    auto context = AdminContext();
    const grpc::Status status = admin->CreateRollout(context.get(), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();

    // Reports find their device only once its record is written.
    ASSERT_TRUE(Eventually([&] {
      v1::ReportMeasurementResponse measured;
      return Report(*stub, Measurement("m-arm-0", "arm-0", "w4a16-tinygemm", 31.5, 16), &measured)
          .ok();
    }));
    v1::ReportOutcomeRequest outcome;
    outcome.set_idempotency_key("o-arm-0");
    outcome.set_device_id("arm-0");
    outcome.set_outcome(v1::OUTCOME_ENGINE_STARTED);
    outcome.set_path("w4a16-tinygemm");
    v1::ReportOutcomeResponse reported;
    auto outcome_context = ContextWithDeadline();
    EXPECT_TRUE(stub->ReportOutcome(outcome_context.get(), outcome, &reported).ok());

    // Refused on reload; the last good policy keeps serving.
    WriteFileOrDie(dir_.File("policy.yaml"), "paths: [unterminated\n");
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<PrometheusProcess> prometheus_;
};

TEST_F(E2ePrometheusPackTest, EveryDashboardExpressionReturnsData) {
  MakeTraffic();
  if (HasFatalFailure()) return;
  const std::vector<std::string> expressions = DashboardExpressions();
  ASSERT_GE(expressions.size(), 20u);
  // One deadline for all: they fill in together, scrape by scrape.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (const std::string& expr : expressions) {
    SCOPED_TRACE(expr);
    absl::StatusOr<std::vector<Sample>> samples;
    do {
      samples = prometheus_->Query(expr);
      if (samples.ok() && !samples->empty()) break;
      absl::SleepFor(absl::Milliseconds(250));
    } while (absl::Now() < deadline);
    ASSERT_TRUE(samples.ok()) << samples.status();
    EXPECT_FALSE(samples->empty()) << "no data; server metrics:\n"
                                   << HttpGet(server_->metrics_address(), "/metrics").value_or("");
  }
}

TEST_F(E2ePrometheusPackTest, EveryAlertEvaluatesAndIsHealthy) {
  MakeTraffic();
  if (HasFatalFailure()) return;
  const YAML::Node rules =
      YAML::LoadFile(std::string(WEIGHTPATH_SOURCE_DIR) + "/deploy/prometheus/weightpath-rules.yaml");
  size_t alerts = 0;
  for (const YAML::Node& group : rules["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      ++alerts;
      SCOPED_TRACE(rule["alert"].as<std::string>());
      absl::StatusOr<std::vector<Sample>> samples = prometheus_->Query(rule["expr"].as<std::string>());
      EXPECT_TRUE(samples.ok()) << samples.status();
    }
  }
  EXPECT_GE(alerts, 10u);

  // Prometheus' own evaluation of the loaded rules: every one healthy.
  std::map<std::string, std::string> health, state;
  const absl::Time deadline = absl::Now() + kQueryTimeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<google::protobuf::Struct> data = prometheus_->ApiData("/api/v1/rules");
    ASSERT_TRUE(data.ok()) << data.status();
    health.clear();
    state.clear();
    for (const auto& group : data->fields().at("groups").list_value().values()) {
      for (const auto& rule : group.struct_value().fields().at("rules").list_value().values()) {
        const auto& fields = rule.struct_value().fields();
        const std::string name = fields.at("name").string_value();
        health[name] = fields.at("health").string_value();
        state[name] = fields.count("state") ? fields.at("state").string_value() : "";
      }
    }
    if (health.size() == alerts &&
        std::all_of(health.begin(), health.end(),
                    [](const auto& entry) { return entry.second == "ok"; })) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  EXPECT_EQ(health.size(), alerts);
  for (const auto& [name, rule_health] : health) {
    EXPECT_EQ(rule_health, "ok") << name << "\nprometheus log:\n" << prometheus_->Log();
  }
  EXPECT_NE(state["WeightpathStoreDown"], "firing");
  EXPECT_NE(state["WeightpathServerAbsent"], "firing");
}

// deploy/prometheus's rules as they are but for WeightpathResolveErrors'
// `for:`, cut from 10m to 2s so the test sees the alert fire.
class E2ePrometheusAlertTest : public E2ePrometheusPackTest {
 protected:
  std::string RulesFile() override {
    YAML::Node rules =
        YAML::LoadFile(std::string(WEIGHTPATH_SOURCE_DIR) + "/deploy/prometheus/weightpath-rules.yaml");
    bool overridden = false;
    for (YAML::Node group : rules["groups"]) {
      for (YAML::Node rule : group["rules"]) {
        if (rule["alert"].as<std::string>() != "WeightpathResolveErrors") continue;
        EXPECT_TRUE(rule["for"].IsDefined());
        rule["for"] = "2s";
        overridden = true;
      }
    }
    EXPECT_TRUE(overridden) << "WeightpathResolveErrors is not in the rules";
    YAML::Emitter emitter;
    emitter << rules;
    WriteFileOrDie(dir_.File("rules-short-for.yaml"), emitter.c_str());
    return dir_.File("rules-short-for.yaml");
  }

  // The state Prometheus' /api/v1/alerts gives `alert_name` ("pending",
  // "firing"), "inactive" while it lists no such alert.
  std::string AlertState(const std::string& alert_name, std::string* summary = nullptr) const {
    absl::StatusOr<google::protobuf::Struct> data = prometheus_->ApiData("/api/v1/alerts");
    if (!data.ok()) return data.status().ToString();
    for (const auto& alert : data->fields().at("alerts").list_value().values()) {
      const auto& fields = alert.struct_value().fields();
      const auto& labels = fields.at("labels").struct_value().fields();
      if (labels.count("alertname") == 0 || labels.at("alertname").string_value() != alert_name) {
        continue;
      }
      if (summary != nullptr && fields.count("annotations") != 0) {
        const auto& annotations = fields.at("annotations").struct_value().fields();
        if (annotations.count("summary") != 0) *summary = annotations.at("summary").string_value();
      }
      return fields.at("state").string_value();
    }
    return "inactive";
  }
};

// Devices asking for a model the catalog does not have get NOT_FOUND, an
// error they cannot fix by themselves: past 5% of resolves, the alert goes
// pending, then fires, as Prometheus itself evaluates the shipped rule.
TEST_F(E2ePrometheusAlertTest, ResolveErrorsDriveWeightpathResolveErrorsToFiring) {
  auto stub = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
  v1::ResolveWeightPathResponse response;
  ASSERT_TRUE(CallResolve(*stub, AmxRequest("healthy-device"), &response).ok());
  // Healthy traffic scraped and evaluated: nothing fires.
  ASSERT_TRUE(prometheus_->WaitForValue("sum(weightpath_resolve_requests_total)", 1).ok());
  EXPECT_EQ(AlertState("WeightpathResolveErrors"), "inactive");

  v1::ResolveWeightPathRequest unknown_model = AmxRequest("misconfigured-device");
  unknown_model.set_model("No-Such-Model");
  // Scrapes and evaluations are each 1 s apart, and a loaded 2-core machine
  // may run late: the errors keep coming until the alert fires or the
  // bound runs out.
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  std::string state, summary, seen = "none";
  while (absl::Now() < deadline) {
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(CallResolve(*stub, unknown_model, &response).error_code(),
                grpc::StatusCode::NOT_FOUND);
    }
    state = AlertState("WeightpathResolveErrors", &summary);
    if (state != "inactive" && !absl::StrContains(seen, state)) absl::StrAppend(&seen, " ", state);
    if (state == "firing") break;
    absl::SleepFor(absl::Milliseconds(250));
  }
  ASSERT_EQ(state, "firing") << "states seen:" << seen << "\nprometheus log:\n"
                             << prometheus_->Log();
  EXPECT_EQ(summary, "More than 5% of weight-path resolves fail");
  // Not an alert that fires on anything: the others stay quiet.
  EXPECT_EQ(AlertState("WeightpathStoreDown"), "inactive");
  EXPECT_EQ(AlertState("WeightpathRolloutPausedByGate"), "inactive");
}

TEST_F(E2ePrometheusPackTest, ExpositionIsLintCleanWithProcessMetricsAndZeroSeries) {
  MakeTraffic();
  if (HasFatalFailure()) return;
  absl::StatusOr<std::string> exposition = HttpGet(server_->metrics_address(), "/metrics");
  ASSERT_TRUE(exposition.ok()) << exposition.status();
  WriteFileOrDie(dir_.File("metrics.txt"), *exposition);
  const weightpath::testing::ProcessResult lint = weightpath::testing::RunProcess(
      {"/bin/sh", "-c", "promtool check metrics < '" + dir_.File("metrics.txt") + "'"});
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "");

  const auto value = [&](const std::string& series) {
    absl::StatusOr<double> found = SampleValue(*exposition, series);
    EXPECT_TRUE(found.ok()) << series << ": " << found.status();
    return found.value_or(-1);
  };
  // Known label values exist before their first event.
  EXPECT_EQ(value(R"(weightpath_rollout_gate_breaches_total{gate="boot",rollout="fidelity-agentic"})"), 0);
  EXPECT_EQ(value(R"(weightpath_rollout_outcomes_total{cohort="member",outcome="boot_failed",rollout="fidelity-agentic"})"),
            0);
  EXPECT_EQ(value(R"(weightpath_measurement_regressions_total{hardware_class="arm64_cpu",path="w4a16-tinygemm"})"),
            0);
  EXPECT_EQ(value(R"(weightpath_rpc_requests_total{code="INTERNAL",method="FleetAdmin/AbortRollout"})"), 0);
  EXPECT_EQ(value(R"(weightpath_rpc_requests_total{code="OK",method="FleetAdmin/CreateRollout"})"), 1);
  EXPECT_GE(value(R"(weightpath_rpc_requests_total{code="OK",method="WeightPath/ReportMeasurement"})"), 1);
  EXPECT_GE(value("weightpath_fleet_queue_pending_records"), 0);

  EXPECT_GT(value("process_open_fds"), 3);
  EXPECT_GT(value("process_max_fds"), value("process_open_fds"));
  EXPECT_GT(value("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(value("process_virtual_memory_bytes"), value("process_resident_memory_bytes"));
  EXPECT_GE(value("process_cpu_seconds_total"), 0);
  const double started = value("process_start_time_seconds");
  EXPECT_NEAR(started, absl::ToUnixSeconds(absl::Now()), 120);
}

}  // namespace
}  // namespace weightpath::server::testing
