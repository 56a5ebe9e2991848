// The device registry is soft state: when it cannot be written the
// write-behind queue fills, and ResolveWeightPath must keep answering while
// every record that never reaches the registry is counted. The fault is
// real: this test holds SQLite's write lock on the server's registry file,
// so the flusher blocks in the store exactly as behind a stuck disk.
//
// The queue is made small with --registry_queue_capacity and
// --registry_batch_size so a few hundred resolves overrun it.
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/store/sqlite_file_connection.h"

namespace weightpath::server::testing {
namespace {

constexpr char kDropped[] = "weightpath_fleet_records_dropped_total";
constexpr char kFlushed[] = "weightpath_fleet_records_flushed_total";
constexpr char kFailed[] = "weightpath_fleet_flush_failed_records_total";

struct WriteBehindMetrics {
  double dropped = -1;
  double flushed = -1;
  double failed = -1;
};

absl::StatusOr<WriteBehindMetrics> Scrape(const ServerProcess& server) {
  absl::StatusOr<std::string> text = HttpGet(server.metrics_address(), "/metrics");
  if (!text.ok()) return text.status();
  WriteBehindMetrics metrics;
  for (auto [series, value] : {std::pair{kDropped, &metrics.dropped},
                               std::pair{kFlushed, &metrics.flushed},
                               std::pair{kFailed, &metrics.failed}}) {
    absl::StatusOr<double> sample = SampleValue(*text, series);
    if (!sample.ok()) return sample.status();
    *value = *sample;
  }
  return metrics;
}

TEST(FleetQueueFullTest, ResolvesStayOkAndEveryRecordNotInTheRegistryIsCounted) {
  constexpr int kCapacity = 300;
  constexpr int kBatch = 50;
  // Accepted records are at most a full queue plus the batches the flusher
  // takes while blocked, one batch per SQLite busy timeout (10 s): this many
  // drops for certain unless resolving runs under 7 a second.
  const int total = kCapacity + 4 * kBatch;

  TempDir dir;
  const std::string registry = dir.File("fleet.db");
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--store=sqlite:" + registry, "--fleet_refresh_interval=100ms",
                            absl::StrCat("--registry_queue_capacity=", kCapacity),
                            absl::StrCat("--registry_batch_size=", kBatch)});
  ASSERT_TRUE(server.ok()) << server.status();

  store::testing::SqliteFileConnection file(registry);
  ASSERT_TRUE(file.Exec("BEGIN EXCLUSIVE"));  // the flusher's writes now wait on us

  std::atomic<int> next{0};
  std::atomic<int> answered_ok{0};
  std::mutex failure_mutex;
  std::string first_failure;
  auto channel = PlaintextChannel((*server)->grpc_address());
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      auto stub = v1::WeightPath::NewStub(channel);
      for (int i = next.fetch_add(1); i < total; i = next.fetch_add(1)) {
        v1::ResolveWeightPathResponse response;
        const grpc::Status status =
            CallResolve(*stub, ArmRequest(absl::StrFormat("queue-full-%06d", i)), &response);
        if (status.ok()) {
          answered_ok.fetch_add(1);
        } else {
          std::lock_guard lock(failure_mutex);
          if (first_failure.empty()) first_failure = status.error_message();
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(answered_ok.load(), total) << "first failure: " << first_failure;

  absl::StatusOr<WriteBehindMetrics> locked = Scrape(**server);
  ASSERT_TRUE(locked.ok()) << locked.status();
  EXPECT_GT(locked->dropped, 0);
  // Drops start only once the queue is full, so at least a queue's worth
  // was accepted.
  EXPECT_LE(locked->dropped, total - static_cast<double>(kCapacity));
  EXPECT_EQ(file.Count("SELECT count(*) FROM devices"), 0) << "written through our lock?";

  ASSERT_TRUE(file.Exec("COMMIT"));

  // Drained: every accepted record was either written or lost with a batch
  // the store refused (one that waited out the busy timeout under our lock).
  absl::StatusOr<WriteBehindMetrics> drained;
  const bool settled = Eventually(
      [&] {
        drained = Scrape(**server);
        return drained.ok() && drained->flushed + drained->failed + drained->dropped == total;
      },
      absl::Seconds(90));
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_TRUE(settled) << "dropped " << drained->dropped << " flushed " << drained->flushed
                       << " failed " << drained->failed << " of " << total << "\n"
                       << (*server)->Log();
  EXPECT_EQ(drained->dropped, locked->dropped) << "no resolve ran after the scrape";

  const int64_t recorded =
      file.Count("SELECT count(DISTINCT device_id) FROM devices WHERE device_id LIKE 'queue-full-%'");
  EXPECT_EQ(file.Count("SELECT count(*) FROM devices"), recorded);
  EXPECT_EQ(static_cast<double>(recorded), drained->flushed);
  // Nothing accepted is lost silently.
  EXPECT_EQ(static_cast<double>(recorded) + drained->dropped + drained->failed, total);
  RecordProperty("dropped", static_cast<int>(drained->dropped));
  RecordProperty("failed", static_cast<int>(drained->failed));
  RecordProperty("recorded", static_cast<int>(recorded));
}

}  // namespace
}  // namespace weightpath::server::testing
