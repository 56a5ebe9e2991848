// What a device (or something posing as one) sends on the report path,
// against the real weightpath-server on a real SQLite file:
//  * a report right after the resolve is taken, though the registry is
//    written behind the resolve;
//  * a thousand reports naming made-up paths and rollouts leave /metrics
//    the size it was: label values come only from the policy's paths and
//    the store's rollouts;
//  * every stored string is bounded and device ids are held to the
//    resolve's rules, and task counts cannot wrap;
//  * an idempotency key is its own device's;
//  * the overload guards: a per-device rate limit and a global in-flight
//    limit answer RESOURCE_EXHAUSTED with grpc-retry-pushback-ms.
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The default policy serves ArmRequest's device this path.
constexpr char kArmPath[] = "w4a16-tinygemm";

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

v1::ReportOutcomeRequest Outcome(const std::string& key, const std::string& device_id,
                                 v1::Outcome outcome, const std::string& rollout_id = "") {
  v1::ReportOutcomeRequest request;
  request.set_idempotency_key(key);
  request.set_device_id(device_id);
  request.set_outcome(outcome);
  request.set_path(kArmPath);
  request.set_rollout_id(rollout_id);
  return request;
}

// The pushback trailer of a finished call, in ms; -2 when absent.
int64_t PushbackMs(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto found = trailers.find("grpc-retry-pushback-ms");
  if (found == trailers.end()) return -2;
  int64_t ms = -3;
  if (!absl::SimpleAtoi(absl::string_view(found->second.data(), found->second.size()), &ms)) {
    return -3;
  }
  return ms;
}

class DeviceReportsTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> extra = {}) {
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    std::vector<std::string> args = {"--store=sqlite:" + registry(),
                                     "--admin_token_file=" + dir_.File("token"),
                                     "--fleet_refresh_interval=200ms"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<ServerProcess>> started = ServerProcess::Start(args);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    channel_ = PlaintextChannel(server_->grpc_address());
    stub_ = v1::WeightPath::NewStub(channel_);
    admin_ = v1::FleetAdmin::NewStub(channel_);
  }

  std::string registry() const { return dir_.File("fleet.db"); }

  grpc::Status Resolve(const std::string& device_id, grpc::ClientContext* context = nullptr) {
    v1::ResolveWeightPathResponse response;
    std::unique_ptr<grpc::ClientContext> own = ContextWithDeadline();
    return stub_->ResolveWeightPath(context != nullptr ? context : own.get(), ArmRequest(device_id),
                                    &response);
  }

  grpc::Status SendOutcome(const v1::ReportOutcomeRequest& request, bool* duplicate = nullptr) {
    auto context = ContextWithDeadline();
    v1::ReportOutcomeResponse response;
    const grpc::Status status = stub_->ReportOutcome(context.get(), request, &response);
    if (duplicate != nullptr) *duplicate = response.duplicate();
    return status;
  }

  std::string Metrics() {
    absl::StatusOr<std::string> text = HttpGet(server_->metrics_address(), "/metrics");
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WeightPath::Stub> stub_;
  std::unique_ptr<v1::FleetAdmin::Stub> admin_;
};

TEST_F(DeviceReportsTest, AReportRightAfterTheResolveIsTakenEveryTime) {
  // A minute before the registry writes on its own: every report below
  // finds its device only in the write-behind queue.
  StartServer({"--registry_flush_period=1m"});
  for (int i = 0; i < 50; ++i) {
    const std::string device = absl::StrFormat("fresh-%02d", i);
    ASSERT_TRUE(Resolve(device).ok());
    v1::ReportMeasurementResponse response;
    const grpc::Status status =
        Report(*stub_, Measurement(absl::StrCat("m-", device), device, kArmPath, 31.5, 16), &response);
    ASSERT_TRUE(status.ok()) << device << ": " << status.error_code() << " "
                             << status.error_message();
    EXPECT_FALSE(response.duplicate());
    EXPECT_FALSE(response.measurement_id().empty());
  }
  // Written ahead of its batch, so operators see it too.
  v1::GetDeviceRequest get;
  get.set_device_id("fresh-00");
  v1::Device device;
  auto context = AdminContext();
  EXPECT_TRUE(admin_->GetDevice(context.get(), get, &device).ok());
  // A device that never resolved is still unknown.
  v1::ReportMeasurementResponse response;
  const grpc::Status stranger =
      Report(*stub_, Measurement("m-stranger", "never-resolved", kArmPath, 31.5, 16), &response);
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::NOT_FOUND) << stranger.error_message();
  EXPECT_THAT(stranger.error_message(), HasSubstr("must resolve its weight path before reporting"));
}

TEST_F(DeviceReportsTest, MadeUpPathsAndRolloutsNeverBecomeMetricSeries) {
  StartServer();
  constexpr int kDevices = 10;
  for (int d = 0; d < kDevices; ++d) ASSERT_TRUE(Resolve(absl::StrCat("arm-", d)).ok());
  {
    v1::CreateRolloutRequest create;
    *create.mutable_rollout() = FidelityRollout("fidelity-agentic");
    v1::Rollout created;
    auto context = AdminContext();
    const grpc::Status status = admin_->CreateRollout(context.get(), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  // The legitimate series, once each, before the baseline.
  v1::ReportMeasurementResponse measured;
  ASSERT_TRUE(Report(*stub_, Measurement("legit-m", "arm-0", kArmPath, 31.5, 16), &measured).ok());
  ASSERT_TRUE(SendOutcome(Outcome("legit-o", "arm-0", v1::OUTCOME_ENGINE_STARTED, "fidelity-agentic")).ok());
  ASSERT_TRUE(SendOutcome(Outcome("legit-c", "arm-0", v1::OUTCOME_ENGINE_STARTED)).ok());
  absl::SleepFor(absl::Milliseconds(500));  // a refresh, for the path_verified gauges
  const std::string before = Metrics();

  constexpr int kReports = 1000;
  std::atomic<int> measurement_failures{0}, outcome_not_found{0}, outcome_other{0};
  std::string first_failure;
  std::vector<std::thread> senders;
  for (int t = 0; t < 8; ++t) {
    senders.emplace_back([&, t] {
      auto stub = v1::WeightPath::NewStub(channel_);
      for (int i = t; i < kReports; i += 8) {
        const std::string device = absl::StrCat("arm-", i % kDevices);
        v1::ReportMeasurementResponse response;
        if (!Report(*stub, Measurement(absl::StrCat("m-", i), device, absl::StrFormat("path-%04d", i),
                                       31.5, 16),
                    &response)
                 .ok()) {
          ++measurement_failures;
        }
        auto context = ContextWithDeadline();
        v1::ReportOutcomeResponse outcome;
        const grpc::Status status = stub->ReportOutcome(
            context.get(),
            Outcome(absl::StrCat("o-", i), device, v1::OUTCOME_BOOT_FAILED,
                    absl::StrFormat("rollout-%04d", i)),
            &outcome);
        if (status.error_code() == grpc::StatusCode::NOT_FOUND &&
            absl::StrContains(status.error_message(), "rollout_id")) {
          ++outcome_not_found;
        } else {
          ++outcome_other;
        }
      }
    });
  }
  for (std::thread& sender : senders) sender.join();
  EXPECT_EQ(measurement_failures.load(), 0) << server_->Log();
  EXPECT_EQ(outcome_not_found.load(), kReports);
  EXPECT_EQ(outcome_other.load(), 0);
  absl::SleepFor(absl::Milliseconds(500));  // refreshes have read the thousand rows

  const std::string after = Metrics();
  std::printf("/metrics: %zu bytes before, %zu after %d reports of made-up paths and %d of "
              "made-up rollouts\n",
              before.size(), after.size(), kReports, kReports);
  RecordProperty("metrics_bytes_before", static_cast<int>(before.size()));
  RecordProperty("metrics_bytes_after", static_cast<int>(after.size()));
  EXPECT_THAT(after, Not(HasSubstr("path-0")));
  EXPECT_THAT(after, Not(HasSubstr("rollout-0")));
  // One new series (the "other" path of this class) and grown counter values.
  EXPECT_LT(after.size(), before.size() + 1024);
  EXPECT_EQ(*SampleValue(after, "weightpath_measurements_total{hardware_class=\"arm64_cpu\",path=\"other\"}"),
            kReports);
  EXPECT_EQ(*SampleValue(after, absl::StrCat("weightpath_measurements_total{hardware_class=\"arm64_cpu\",path=\"",
                                             kArmPath, "\"}")),
            1);

  // Never lost: every one of them is in the store, under its own path.
  v1::GetVerificationMatrixResponse matrix;
  auto context = AdminContext();
  ASSERT_TRUE(admin_->GetVerificationMatrix(context.get(), v1::GetVerificationMatrixRequest(), &matrix).ok());
  int made_up_cells = 0;
  for (const v1::VerificationCell& cell : matrix.cells()) {
    if (absl::StartsWith(cell.path(), "path-")) ++made_up_cells;
  }
  EXPECT_EQ(made_up_cells, kReports);
}

TEST_F(DeviceReportsTest, EveryStoredStringIsBoundedAndDeviceIdsFollowTheResolvesRules) {
  StartServer();
  ASSERT_TRUE(Resolve("arm-0").ok());
  struct Case {
    std::function<grpc::Status()> call;
    std::string message;
  };
  auto measurement = [&](std::function<void(v1::ReportMeasurementRequest&)> spoil) {
    return [this, spoil] {
      v1::ReportMeasurementRequest request = Measurement("k", "arm-0", kArmPath, 31.5, 16);
      spoil(request);
      v1::ReportMeasurementResponse response;
      return Report(*stub_, request, &response);
    };
  };
  auto outcome = [&](std::function<void(v1::ReportOutcomeRequest&)> spoil) {
    return [this, spoil] {
      v1::ReportOutcomeRequest request = Outcome("k", "arm-0", v1::OUTCOME_ENGINE_START_FAILED);
      spoil(request);
      return SendOutcome(request);
    };
  };
  const std::vector<Case> cases = {
      {measurement([](auto& r) { r.set_model(std::string(257, 'm')); }), "model is 257 bytes"},
      {measurement([](auto& r) { r.set_engine_version(std::string(60000, 'e')); }),
       "engine_version is 60000 bytes"},
      {measurement([](auto& r) { r.set_device_id("arm-0\nforged line"); }),
       "device_id has a character outside"},
      {outcome([](auto& r) { r.set_detail(std::string(1025, 'd')); }), "detail is 1025 bytes"},
      {outcome([](auto& r) { r.set_path(std::string(257, 'p')); }), "path is 257 bytes"},
      {outcome([](auto& r) { r.set_rollout_id(std::string(60000, 'r')); }), "rollout_id is 60000"},
      {outcome([](auto& r) { r.set_artifact_sha256(std::string(257, 'a')); }), "artifact_sha256"},
      {outcome([](auto& r) { r.set_policy_version(std::string(257, 'v')); }), "policy_version"},
      {outcome([](auto& r) { r.set_device_id("arm-0 \x1b[2J"); }), "device_id has a character"},
      // 4294967295 + 1 wraps to 0 in 32 bits; it is no "no task counts".
      {outcome([](auto& r) {
         r.set_outcome(v1::OUTCOME_ENGINE_STARTED);
         r.set_tasks_completed(4294967295u);
         r.set_tasks_undone(1);
       }),
       "only allowed with outcome OUTCOME_TASKS"},
  };
  for (const Case& c : cases) {
    const grpc::Status status = c.call();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
  // At the bounds, accepted.
  v1::ReportOutcomeRequest longest = Outcome("longest", "arm-0", v1::OUTCOME_ENGINE_START_FAILED);
  longest.set_detail(std::string(1024, 'd'));
  longest.set_artifact_sha256(std::string(256, 'a'));
  EXPECT_TRUE(SendOutcome(longest).ok());
  v1::ReportOutcomeRequest tasks = Outcome("tasks", "arm-0", v1::OUTCOME_TASKS);
  tasks.set_tasks_completed(4294967295u);
  tasks.set_tasks_undone(1);
  EXPECT_TRUE(SendOutcome(tasks).ok());
  // The refused device ids never reached the log verbatim.
  EXPECT_THAT(server_->Log(), Not(HasSubstr("\nforged line")));
}

TEST_F(DeviceReportsTest, AnotherDevicesIdempotencyKeyIsNoDuplicate) {
  StartServer();
  ASSERT_TRUE(Resolve("victim").ok());
  ASSERT_TRUE(Resolve("attacker").ok());
  v1::ReportMeasurementResponse response;
  ASSERT_TRUE(Report(*stub_, Measurement("shared-key", "attacker", kArmPath, 1.0, 16), &response).ok());
  ASSERT_TRUE(Report(*stub_, Measurement("shared-key", "victim", kArmPath, 31.5, 16), &response).ok());
  EXPECT_FALSE(response.duplicate()) << "the victim's real report must be stored";
  ASSERT_TRUE(Report(*stub_, Measurement("shared-key", "victim", kArmPath, 31.5, 16), &response).ok());
  EXPECT_TRUE(response.duplicate()) << "its own retry is still one report";
  bool duplicate = true;
  ASSERT_TRUE(SendOutcome(Outcome("o-key", "attacker", v1::OUTCOME_BOOT_FAILED), &duplicate).ok());
  ASSERT_TRUE(SendOutcome(Outcome("o-key", "victim", v1::OUTCOME_ENGINE_STARTED), &duplicate).ok());
  EXPECT_FALSE(duplicate);
}

TEST_F(DeviceReportsTest, DownloadedBytesAreCountedBySourceOnceAndBounded) {
  StartServer();
  ASSERT_TRUE(Resolve("site-device-1").ok());
  ASSERT_TRUE(Resolve("site-device-2").ok());
  v1::ReportOutcomeRequest through_cache =
      Outcome("d-1", "site-device-1", v1::OUTCOME_BOOT_OK);
  through_cache.set_downloaded_from_mirrors_bytes(3'000'000'000);
  through_cache.set_downloaded_from_origin_bytes(1'000);
  v1::ReportOutcomeRequest from_origin =
      Outcome("d-2", "site-device-2", v1::OUTCOME_ENGINE_STARTED);
  from_origin.set_downloaded_from_origin_bytes(2'500'000);
  ASSERT_TRUE(SendOutcome(through_cache).ok());
  ASSERT_TRUE(SendOutcome(from_origin).ok());
  bool duplicate = false;
  ASSERT_TRUE(SendOutcome(through_cache, &duplicate).ok());
  EXPECT_TRUE(duplicate) << "a retried report is counted once";

  // A hostile count past a petabyte would swamp the fleet's totals.
  v1::ReportOutcomeRequest hostile = Outcome("d-3", "site-device-2", v1::OUTCOME_BOOT_OK);
  hostile.set_downloaded_from_mirrors_bytes((uint64_t{1} << 50) + 1);
  const grpc::Status refused = SendOutcome(hostile);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("downloaded_from_mirrors_bytes"));
  hostile.set_downloaded_from_mirrors_bytes(0);
  hostile.set_downloaded_from_origin_bytes(UINT64_MAX);
  EXPECT_THAT(SendOutcome(hostile).error_message(), HasSubstr("downloaded_from_origin_bytes"));

  const std::string metrics = Metrics();
  EXPECT_EQ(*SampleValue(metrics, "weightpath_device_download_bytes_total{source=\"mirror\"}"),
            3'000'000'000.0);
  EXPECT_EQ(*SampleValue(metrics, "weightpath_device_download_bytes_total{source=\"origin\"}"),
            2'501'000.0);
}

TEST_F(DeviceReportsTest, DeviceRateLimitShedsWithTheNextTokensPushback) {
  // A token every 500 ms, three at once; one bucket for all of a device's calls.
  StartServer({"--device_rate_limit=2", "--device_rate_burst=3"});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Resolve("noisy").ok()) << i;
  grpc::ClientContext refused_context;
  refused_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::Status refused = Resolve("noisy", &refused_context);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("--device_rate_limit"));
  const int64_t pushback = PushbackMs(refused_context);
  EXPECT_GT(pushback, 0);
  EXPECT_LE(pushback, 500);
  // The same bucket answers the device's reports.
  auto report_context = ContextWithDeadline();
  v1::ReportMeasurementResponse response;
  const grpc::Status report = stub_->ReportMeasurement(
      report_context.get(), Measurement("noisy-m", "noisy", kArmPath, 31.5, 16), &response);
  EXPECT_EQ(report.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << report.error_message();
  EXPECT_GT(PushbackMs(*report_context), 0);
  // Other devices are not held back by it.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Resolve(absl::StrCat("quiet-", i)).ok()) << i;
  // Coming back when told to works.
  absl::SleepFor(absl::Milliseconds(PushbackMs(refused_context)));
  EXPECT_TRUE(Resolve("noisy").ok());

  const std::string metrics = Metrics();
  EXPECT_GE(*SampleValue(metrics, "weightpath_device_calls_shed_total{limit=\"device_rate\",method=\"ResolveWeightPath\"}"), 1);
  EXPECT_GE(*SampleValue(metrics, "weightpath_device_calls_shed_total{limit=\"device_rate\",method=\"ReportMeasurement\"}"), 1);
  EXPECT_EQ(*SampleValue(metrics, "weightpath_device_calls_shed_total{limit=\"inflight\",method=\"ResolveWeightPath\"}"), 0);
}

// A connection of the test's own that holds SQLite's write lock.
class WriteLock {
 public:
  explicit WriteLock(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
    sqlite3_busy_timeout(db_, 10000);
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  ~WriteLock() {
    sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
  }

 private:
  sqlite3* db_ = nullptr;
};

TEST_F(DeviceReportsTest, InflightLimitShedsTheCallsBeyondIt) {
  StartServer({"--max_inflight_device_calls=1"});
  ASSERT_TRUE(Resolve("arm-0").ok());
  v1::ReportMeasurementResponse response;
  ASSERT_TRUE(Report(*stub_, Measurement("warm", "arm-0", kArmPath, 31.5, 16), &response).ok());

  grpc::Status held_report;
  {
    WriteLock lock(registry());
    // This report waits on the lock, holding the only in-flight place.
    std::thread reporter([&] {
      auto stub = v1::WeightPath::NewStub(channel_);
      auto context = ContextWithDeadline(3);
      v1::ReportMeasurementResponse ignored;
      held_report = stub->ReportMeasurement(
          context.get(), Measurement("held", "arm-0", kArmPath, 31.5, 16), &ignored);
    });
    absl::SleepFor(absl::Milliseconds(500));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status shed = Resolve("arm-1", &context);
    EXPECT_EQ(shed.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << shed.error_message();
    EXPECT_THAT(shed.error_message(), HasSubstr("--max_inflight_device_calls"));
    const int64_t pushback = PushbackMs(context);
    EXPECT_GE(pushback, 100);
    EXPECT_LT(pushback, 300);
    reporter.join();
  }
  EXPECT_EQ(held_report.error_code(), grpc::StatusCode::UNAVAILABLE) << held_report.error_message();
  // Its place is free again once the server has finished the call, which
  // can be a moment after the client saw its answer (slow builds: ASan).
  bool resolved = false;
  for (int attempt = 0; attempt < 50 && !resolved; ++attempt) {
    resolved = Resolve("arm-1").ok();
    if (!resolved) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(resolved);
  EXPECT_GE(*SampleValue(Metrics(), "weightpath_device_calls_shed_total{limit=\"inflight\",method=\"ResolveWeightPath\"}"), 1);
}

}  // namespace
}  // namespace weightpath::server::testing
