// The fleet under failure, with the real server binary on both backends:
// kill -9 while agents stream measurements, two replicas sharing one
// PostgreSQL, and PostgreSQL going away under a running server.
#include <signal.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/store/store_backends.h"
#include "tests/store/temporary_postgres.h"

namespace weightpath::server::testing {
namespace {

using store::testing::Backend;
using store::testing::BackendName;
using store::testing::FreshDatabaseUrl;

std::unique_ptr<ServerProcess> StartOrDie(const std::string& url,
                                          std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--store=" + url, "--fleet_refresh_interval=100ms"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto started = ServerProcess::Start(args);
  EXPECT_TRUE(started.ok()) << started.status();
  return started.ok() ? *std::move(started) : nullptr;
}

// Resolves each device and waits until the registry (read directly) has it.
void RegisterDevices(const std::string& address, const std::string& url,
                     const std::vector<std::string>& devices) {
  auto stub = v1::WeightPath::NewStub(PlaintextChannel(address));
  for (const std::string& device : devices) {
    v1::ResolveWeightPathResponse response;
    ASSERT_TRUE(CallResolve(*stub, ArmRequest(device), &response).ok()) << device;
  }
  absl::StatusOr<std::unique_ptr<store::FleetStore>> fleet = store::OpenFleetStore(url);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  for (const std::string& device : devices) {
    ASSERT_TRUE(Eventually([&] { return (*fleet)->GetDevice(device).ok(); })) << device;
  }
}

class FleetKillTest : public ::testing::TestWithParam<Backend> {};

TEST_P(FleetKillTest, EveryAcknowledgedMeasurementSurvivesKillNineAndNoneIsDoubled) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
  ASSERT_TRUE(url.ok()) << url.status();
  std::unique_ptr<ServerProcess> server = StartOrDie(*url);
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> devices = {"agent-0", "agent-1", "agent-2", "agent-3"};
  RegisterDevices(server->grpc_address(), *url, devices);

  std::mutex mutex;
  std::set<std::string> acknowledged;
  std::vector<std::string> sent;
  std::atomic<bool> stop{false};
  std::vector<std::thread> agents;
  for (size_t agent = 0; agent < devices.size(); ++agent) {
    agents.emplace_back([&, agent] {
      auto stub = v1::WeightPath::NewStub(PlaintextChannel(server->grpc_address()));
      for (int n = 0; !stop.load(); ++n) {
        const std::string key = absl::StrCat("agent-", agent, "-report-", n);
        {
          std::lock_guard lock(mutex);
          sent.push_back(key);
        }
        v1::ReportMeasurementResponse response;
        auto context = ContextWithDeadline(2);
        const grpc::Status status = stub->ReportMeasurement(
            context.get(), Measurement(key, devices[agent], "w4a16-tinygemm", 30 + n % 5, 16),
            &response);
        if (!status.ok()) return;  // the server is gone
        std::lock_guard lock(mutex);
        acknowledged.insert(key);
      }
    });
  }
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard lock(mutex);
    return acknowledged.size() >= 40;
  }));
  server->Signal(SIGKILL);
  const ExitResult killed = server->WaitForExit(absl::Seconds(20));
  EXPECT_EQ(killed.signal, SIGKILL);
  stop = true;
  for (std::thread& agent : agents) agent.join();

  // The agents retry everything they sent; what was acknowledged must come
  // back as a duplicate, never as a new measurement.
  std::unique_ptr<ServerProcess> restarted = StartOrDie(*url);
  ASSERT_NE(restarted, nullptr);
  auto stub = v1::WeightPath::NewStub(PlaintextChannel(restarted->grpc_address()));
  for (const std::string& key : sent) {
    const size_t agent = static_cast<size_t>(key[6] - '0');
    v1::ReportMeasurementResponse response;
    ASSERT_TRUE(Report(*stub, Measurement(key, devices[agent], "w4a16-tinygemm", 31, 16), &response)
                    .ok())
        << key;
    if (acknowledged.count(key) > 0) {
      EXPECT_TRUE(response.duplicate()) << key;
    }
  }

  absl::StatusOr<std::unique_ptr<store::FleetStore>> fleet = store::OpenFleetStore(*url);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  absl::StatusOr<std::vector<store::StoredMeasurement>> stored =
      (*fleet)->ListMeasurements(absl::InfinitePast());
  ASSERT_TRUE(stored.ok()) << stored.status();
  std::map<std::string, int> copies;
  for (const store::StoredMeasurement& measurement : *stored) ++copies[measurement.idempotency_key];
  for (const std::string& key : acknowledged) EXPECT_EQ(copies[key], 1) << key;
  EXPECT_EQ(stored->size(), sent.size()) << "every key stored exactly once after the retries";
  for (const auto& [key, count] : copies) EXPECT_EQ(count, 1) << key;
}

INSTANTIATE_TEST_SUITE_P(Backends, FleetKillTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const auto& info) { return BackendName(info.param); });

TEST(FleetReplicasTest, AMeasurementReportedToOneReplicaVerifiesThroughTheOther) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(Backend::kPostgres);
  ASSERT_TRUE(url.ok()) << url.status();
  std::unique_ptr<ServerProcess> first = StartOrDie(*url);
  std::unique_ptr<ServerProcess> second = StartOrDie(*url);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  RegisterDevices(first->grpc_address(), *url, {"arm-1", "arm-2", "arm-3"});

  auto through_first = v1::WeightPath::NewStub(PlaintextChannel(first->grpc_address()));
  auto through_second = v1::WeightPath::NewStub(PlaintextChannel(second->grpc_address()));
  v1::ResolveWeightPathResponse before;
  ASSERT_TRUE(CallResolve(*through_second, ArmRequest("arm-9"), &before).ok());
  ASSERT_FALSE(before.weight_path().verified());
  for (const char* device : {"arm-1", "arm-2", "arm-3"}) {
    v1::ReportMeasurementResponse response;
    ASSERT_TRUE(Report(*through_first,
                       Measurement(absl::StrCat("r-", device), device, "w4a16-tinygemm", 30, 16),
                       &response)
                    .ok());
  }
  v1::ResolveWeightPathResponse after;
  ASSERT_TRUE(Eventually([&] {
    return CallResolve(*through_second, ArmRequest("arm-9"), &after).ok() &&
           after.weight_path().verified();
  })) << second->Log();
  EXPECT_EQ(after.weight_path().verification().source(), v1::Verification::SOURCE_FLEET);
  EXPECT_EQ(after.weight_path().verification().device_count(), 3u);
}

TEST(FleetStoreDownTest, ResolvesFallBackReportsAreUnavailableAndHealthShowsIt) {
  absl::StatusOr<std::unique_ptr<store::testing::TemporaryPostgres>> postgres =
      store::testing::TemporaryPostgres::Start(/*sync_to_disk=*/false);
  ASSERT_TRUE(postgres.ok()) << postgres.status();
  absl::StatusOr<std::string> url = (*postgres)->CreateDatabase("fleet_down");
  ASSERT_TRUE(url.ok()) << url.status();
  std::unique_ptr<ServerProcess> server = StartOrDie(*url);
  ASSERT_NE(server, nullptr);
  RegisterDevices(server->grpc_address(), *url, {"amx-1"});
  auto channel = PlaintextChannel(server->grpc_address());
  auto stub = v1::WeightPath::NewStub(channel);

  postgres->reset();  // pg_ctl stop: the store is gone

  v1::ResolveWeightPathResponse response;
  ASSERT_TRUE(Eventually([&] {
    return CallResolve(*stub, AmxRequest("amx-1"), &response).ok() &&
           response.weight_path().verification().source() == v1::Verification::SOURCE_UNAVAILABLE;
  })) << server->Log();
  // The policy's flag still answers: w4a8-amx is measured on x86.
  EXPECT_TRUE(response.weight_path().verified());

  v1::ReportMeasurementResponse reported;
  const grpc::Status report =
      Report(*stub, Measurement("down-1", "amx-1", "w4a8-amx", 80, 24), &reported);
  EXPECT_EQ(report.error_code(), grpc::StatusCode::UNAVAILABLE) << report.error_message();

  grpc::Status status;
  EXPECT_EQ(CheckHealth(channel, "weightpath.v1.FleetAdmin", &status),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(CheckHealth(channel, "", &status), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(channel, "weightpath.v1.WeightPath", &status),
            grpc::health::v1::HealthCheckResponse::SERVING);
  absl::StatusOr<std::string> metrics = HttpGet(server->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(SampleValue(*metrics, "weightpath_store_up").value_or(-1), 0);
}

}  // namespace
}  // namespace weightpath::server::testing
