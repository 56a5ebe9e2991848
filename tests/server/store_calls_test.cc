// The calls that reach the fleet store (ReportMeasurement, ReportOutcome and
// every FleetAdmin method), against the real binary:
//  * bytes that are not a message of the request type get INVALID_ARGUMENT
//    naming the type, whichever method they are sent to, and each answer is
//    counted under its own method in weightpath_rpc_requests_total;
//  * with SQLite's write lock held by another connection (this test's own,
//    as behind a stuck disk or a long migration), resolves keep their
//    latency while reports wait and then answer UNAVAILABLE, naming the
//    store (but not its file: that is for operators), before their
//    deadline: the store work does not hold gRPC's callback threads, and
//    its wait is bounded by the call's deadline.
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/store/sqlite_file_connection.h"

namespace weightpath::server::testing {
namespace {

// Not a message of any type: tag 0 is never valid, whatever follows it.
const std::string kGarbage("\x00\xff\xff\xff", 4);

struct Method {
  const char* path;
  const char* request_type;
};

// Every method but ResolveWeightPath (which has its own tests), written out:
// fleet_admin.proto declares only the service, so its descriptor is not
// linked into this binary to be listed from.
constexpr Method kStoreMethods[] = {
    {"/weightpath.v1.WeightPath/ReportMeasurement", "weightpath.v1.ReportMeasurementRequest"},
    {"/weightpath.v1.WeightPath/ReportOutcome", "weightpath.v1.ReportOutcomeRequest"},
    {"/weightpath.v1.FleetAdmin/ListDevices", "weightpath.v1.ListDevicesRequest"},
    {"/weightpath.v1.FleetAdmin/GetDevice", "weightpath.v1.GetDeviceRequest"},
    {"/weightpath.v1.FleetAdmin/FleetSummary", "weightpath.v1.FleetSummaryRequest"},
    {"/weightpath.v1.FleetAdmin/GetVerificationMatrix", "weightpath.v1.GetVerificationMatrixRequest"},
    {"/weightpath.v1.FleetAdmin/CreateRollout", "weightpath.v1.CreateRolloutRequest"},
    {"/weightpath.v1.FleetAdmin/GetRollout", "weightpath.v1.GetRolloutRequest"},
    {"/weightpath.v1.FleetAdmin/ListRollouts", "weightpath.v1.ListRolloutsRequest"},
    {"/weightpath.v1.FleetAdmin/PauseRollout", "weightpath.v1.RolloutControlRequest"},
    {"/weightpath.v1.FleetAdmin/ResumeRollout", "weightpath.v1.RolloutControlRequest"},
    {"/weightpath.v1.FleetAdmin/AdvanceRollout", "weightpath.v1.RolloutControlRequest"},
    {"/weightpath.v1.FleetAdmin/AbortRollout", "weightpath.v1.RolloutControlRequest"},
    {"/weightpath.v1.FleetAdmin/UpdateRollout", "weightpath.v1.UpdateRolloutRequest"},
    {"/weightpath.v1.FleetAdmin/DeleteRollout", "weightpath.v1.DeleteRolloutRequest"},
    {"/weightpath.v1.FleetAdmin/ExplainDecision", "weightpath.v1.ExplainDecisionRequest"},
    {"/weightpath.v1.FleetAdmin/ListAuditEvents", "weightpath.v1.ListAuditEventsRequest"},
};

// The value of `series` (a whole name{labels} as the server writes it) in
// the exposition `text`; -1 when it is not there.
double SeriesValue(const std::string& text, const std::string& series) {
  const std::string line_start = series + " ";
  for (size_t at = text.find(line_start); at != std::string::npos;
       at = text.find(line_start, at + 1)) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + line_start.size()));
  }
  return -1;
}

class StoreCallsTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> extra_args = {}) {
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    std::vector<std::string> args = {"--store=sqlite:" + registry(),
                                     "--admin_token_file=" + dir_.File("token"),
                                     "--registry_flush_period=50ms"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(args);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = PlaintextChannel(server_->grpc_address());
  }

  std::string registry() const { return dir_.File("fleet.db"); }

  // One unary call of raw bytes to "/SERVICE/METHOD", as an operator.
  grpc::Status CallRaw(const std::string& method, const std::string& bytes) {
    grpc::GenericStub stub(channel_);
    std::unique_ptr<grpc::ClientContext> context = AdminContext();
    const grpc::Slice slice(bytes);
    const grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    grpc::Status result;
    stub.UnaryCall(context.get(), method, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status status) {
                     std::lock_guard lock(mutex);
                     result = std::move(status);
                     done = true;
                     done_cv.notify_one();
                   });
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return done; });
    return result;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(StoreCallsTest, MalformedRequestsGetInvalidArgumentNamingTheRequestType) {
  StartServer();
  for (const Method& method : kStoreMethods) {
    const grpc::Status status = CallRaw(method.path, kGarbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method.path << ": " << status.error_code() << " " << status.error_message();
    EXPECT_NE(status.error_message().find(method.request_type), std::string::npos)
        << method.path << ": " << status.error_message();
  }
  // A well-formed request still reaches its handler (here: its validation).
  const grpc::Status empty_report =
      CallRaw("/weightpath.v1.WeightPath/ReportMeasurement", std::string());
  EXPECT_EQ(empty_report.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(empty_report.error_message().find("ReportMeasurementRequest"), std::string::npos)
      << empty_report.error_message();
  const grpc::Status empty_list = CallRaw("/weightpath.v1.FleetAdmin/ListRollouts", std::string());
  EXPECT_TRUE(empty_list.ok()) << empty_list.error_message();

  // Every answer above is counted under the method it was sent to.
  const absl::StatusOr<std::string> metrics = HttpGet(server_->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  for (const Method& method : kStoreMethods) {
    const std::string label = std::string(method.path).substr(std::string("/weightpath.v1.").size());
    const double expected = label == "WeightPath/ReportMeasurement" ? 2 : 1;
    EXPECT_EQ(SeriesValue(*metrics, absl::StrCat(R"(weightpath_rpc_requests_total{code="INVALID_ARGUMENT",method=")",
                                                 label, R"("})")),
              expected)
        << label;
  }
  EXPECT_EQ(SeriesValue(*metrics,
                        R"(weightpath_rpc_requests_total{code="OK",method="FleetAdmin/ListRollouts"})"),
            1);
  // The resolve counts on its own metric, not on this one.
  EXPECT_EQ(metrics->find(R"(method="WeightPath/ResolveWeightPath")"), std::string::npos);
}

struct Latencies {
  std::vector<double> ms;
  int failed = 0;
  std::string first_failure;

  double Percentile(double p) const {
    if (ms.empty()) return -1;
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
  }
};

// Sequential resolves for `duration`, each timed.
Latencies TimeResolves(const std::shared_ptr<grpc::Channel>& channel, absl::Duration duration) {
  auto stub = v1::WeightPath::NewStub(channel);
  Latencies latencies;
  const absl::Time end = absl::Now() + duration;
  for (int i = 0; absl::Now() < end; ++i) {
    v1::ResolveWeightPathResponse response;
    const absl::Time started = absl::Now();
    const grpc::Status status =
        CallResolve(*stub, ArmRequest(absl::StrFormat("lock-resolve-%04d", i % 50)), &response);
    latencies.ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - started));
    if (!status.ok()) {
      if (latencies.failed++ == 0) latencies.first_failure = status.error_message();
    }
  }
  return latencies;
}

// Agentic devices onto fidelity, in two stages.
v1::Rollout FidelityRollout(const std::string& id) {
  v1::Rollout rollout;
  rollout.set_id(id);
  (*rollout.mutable_selector()->mutable_match_labels())["workload"] = "agentic";
  rollout.mutable_action()->set_set_priority(v1::PRIORITY_FIDELITY);
  for (uint32_t percent : {10u, 100u}) {
    v1::RolloutStage* stage = rollout.add_stages();
    stage->set_percent(percent);
    stage->set_min_bake_seconds(600);
    stage->set_min_reporting_devices(1);
    stage->set_report_timeout_seconds(1800);
  }
  rollout.mutable_gates()->set_max_task_failure_delta(0.1);
  rollout.mutable_gates()->set_max_engine_failure_delta(0.2);
  return rollout;
}

struct TimedStatus {
  grpc::Status status;
  absl::Duration elapsed;
};

TEST_F(StoreCallsTest, HeldWriteLockDelaysReportsToUnavailableWithinDeadlineNotResolves) {
  StartServer({"--fleet_refresh_interval=200ms"});
  auto stub = v1::WeightPath::NewStub(channel_);
  // Registered, so that the report is refused by the lock and nothing else.
  v1::ResolveWeightPathResponse resolved;
  ASSERT_TRUE(CallResolve(*stub, ArmRequest("lock-reporter"), &resolved).ok());
  v1::ReportMeasurementResponse reported;
  ASSERT_TRUE(Eventually([&] {
    return Report(*stub,
                  Measurement("lock-warmup", "lock-reporter", resolved.weight_path().name(), 40, 8),
                  &reported)
        .ok();
  })) << server_->Log();

  const Latencies unlocked = TimeResolves(channel_, absl::Seconds(1));
  ASSERT_EQ(unlocked.failed, 0) << unlocked.first_failure;

  store::testing::SqliteFileConnection lock(registry());
  ASSERT_TRUE(lock.Exec("BEGIN IMMEDIATE"));  // every write of the server now waits on us

  // More reports than the server has callback threads, so reports blocking
  // those threads would stall the resolves below.
  constexpr int kReports = 12;
  constexpr int kReportDeadlineSeconds = 3;
  std::vector<TimedStatus> reports(kReports);
  std::vector<std::thread> reporters;
  for (int r = 0; r < kReports; ++r) {
    reporters.emplace_back([&, r] {
      auto report_stub = v1::WeightPath::NewStub(channel_);
      auto context = ContextWithDeadline(kReportDeadlineSeconds);
      v1::ReportMeasurementResponse response;
      const absl::Time started = absl::Now();
      reports[r].status = report_stub->ReportMeasurement(
          context.get(),
          Measurement(absl::StrCat("lock-report-", r), "lock-reporter", resolved.weight_path().name(),
                      41, 8),
          &response);
      reports[r].elapsed = absl::Now() - started;
    });
  }
  // An operator's write waits the same way.
  TimedStatus admin;
  std::thread operator_call([&] {
    auto admin_stub = v1::FleetAdmin::NewStub(channel_);
    std::unique_ptr<grpc::ClientContext> context = AdminContext();
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(kReportDeadlineSeconds));
    v1::CreateRolloutRequest request;
    *request.mutable_rollout() = FidelityRollout("lock-rollout");
    v1::Rollout response;
    const absl::Time started = absl::Now();
    admin.status = admin_stub->CreateRollout(context.get(), request, &response);
    admin.elapsed = absl::Now() - started;
  });
  absl::SleepFor(absl::Milliseconds(200));  // the reports are waiting now
  const Latencies locked = TimeResolves(channel_, absl::Seconds(2));
  for (std::thread& reporter : reporters) reporter.join();
  operator_call.join();
  ASSERT_TRUE(lock.Exec("COMMIT"));

  RecordProperty("resolve_p50_ms_unlocked", absl::StrFormat("%.2f", unlocked.Percentile(0.5)));
  RecordProperty("resolve_p99_ms_unlocked", absl::StrFormat("%.2f", unlocked.Percentile(0.99)));
  RecordProperty("resolve_p50_ms_locked", absl::StrFormat("%.2f", locked.Percentile(0.5)));
  RecordProperty("resolve_p99_ms_locked", absl::StrFormat("%.2f", locked.Percentile(0.99)));
  std::printf("resolves, unlocked: %zu calls, p50 %.2f ms, p99 %.2f ms; with the write lock held: "
              "%zu calls, p50 %.2f ms, p99 %.2f ms\n",
              unlocked.ms.size(), unlocked.Percentile(0.5), unlocked.Percentile(0.99),
              locked.ms.size(), locked.Percentile(0.5), locked.Percentile(0.99));

  EXPECT_EQ(locked.failed, 0) << locked.first_failure << "\n" << server_->Log();
  // Generous bounds for a loaded CI machine; a resolve stuck behind a
  // report would take the report's whole wait (seconds).
  EXPECT_LT(locked.Percentile(0.5), std::max(50.0, 10 * unlocked.Percentile(0.5)));
  EXPECT_LT(locked.Percentile(1.0), 1000.0);
  EXPECT_GT(locked.ms.size(), 20u);

  const auto [fastest, slowest] = std::minmax_element(
      reports.begin(), reports.end(), [](auto& a, auto& b) { return a.elapsed < b.elapsed; });
  std::printf("%d reports answered after %s to %s: %s\n", kReports,
              absl::FormatDuration(fastest->elapsed).c_str(),
              absl::FormatDuration(slowest->elapsed).c_str(),
              slowest->status.error_message().c_str());
  std::printf("CreateRollout answered after %s: %s\n", absl::FormatDuration(admin.elapsed).c_str(),
              admin.status.error_message().c_str());

  const absl::Duration deadline = absl::Seconds(kReportDeadlineSeconds);
  for (int r = 0; r < kReports; ++r) {
    SCOPED_TRACE(absl::StrCat("report ", r, " after ", absl::FormatDuration(reports[r].elapsed)));
    EXPECT_EQ(reports[r].status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << reports[r].status.error_message();
    EXPECT_NE(reports[r].status.error_message().find("store"), std::string::npos)
        << reports[r].status.error_message();
    // A device is not told where the store is (its file here; a
    // PostgreSQL URL's host and user), only that it failed.
    EXPECT_EQ(reports[r].status.error_message().find(registry()), std::string::npos)
        << reports[r].status.error_message();
    EXPECT_NE(reports[r].status.error_message().find("retry later"), std::string::npos)
        << reports[r].status.error_message();
    EXPECT_LT(reports[r].elapsed, deadline);
  }
  // They waited for the lock rather than giving up at once.
  EXPECT_GT(slowest->elapsed, deadline / 2);
  EXPECT_EQ(admin.status.error_code(), grpc::StatusCode::UNAVAILABLE) << admin.status.error_message();
  // An operator is told the store's own reason, and the log keeps the one
  // the devices were not told.
  EXPECT_NE(admin.status.error_message().find(registry()), std::string::npos)
      << admin.status.error_message();
  EXPECT_NE(server_->Log().find("WeightPath/ReportMeasurement: answered UNAVAILABLE to the device "
                                "without its reason: sqlite store " + registry()),
            std::string::npos)
      << server_->Log();
  EXPECT_LT(admin.elapsed, deadline);

  // With the lock released the same report is recorded.
  ASSERT_TRUE(Eventually([&] {
    return Report(*stub,
                  Measurement("lock-report-0", "lock-reporter", resolved.weight_path().name(), 41, 8),
                  &reported)
        .ok();
  })) << server_->Log();
}

}  // namespace
}  // namespace weightpath::server::testing
