// What must hold when things go wrong: a writer killed mid-stream loses no
// acknowledged measurement and duplicates none; two replicas on one
// PostgreSQL see each other's writes and cannot overwrite each other's
// rollout updates; a database that goes away turns into UNAVAILABLE.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/call_deadline.h"
#include "store/sql_database.h"
#include "store/store.h"
#include "store/time_convert.h"
#include "tests/store/seed_expectations.h"
#include "tests/store/store_backends.h"
#include "tests/store/temporary_postgres.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::store::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);
constexpr int kAcksBeforeKill = 40;

v1::ReportMeasurementRequest Measurement(const std::string& key, const std::string& device_id,
                                         double decode_tok_s = 86.0) {
  v1::ReportMeasurementRequest request;
  request.set_idempotency_key(key);
  request.set_device_id(device_id);
  request.set_model("Spark-X2.5-1.7B");
  request.set_path("w4a8-amx");
  request.set_decode_tok_s(decode_tok_s);
  request.set_threads(24);
  request.set_fidelity_exact_matches(1);
  request.set_fidelity_prompts(12);
  *request.mutable_measured_at() = ToTimestamp(kT0);
  return request;
}

// The child: an agent-facing writer that acknowledges each committed key
// on the pipe, forever, until it is killed.
[[noreturn]] void RecordUntilKilled(const std::string& url, int ack_fd) {
  absl::StatusOr<std::unique_ptr<FleetStore>> store = OpenFleetStore(url);
  if (!store.ok()) _exit(2);
  for (int i = 0;; ++i) {
    const std::string key = absl::StrCat("ack-", i);
    absl::StatusOr<RecordMeasurementResult> result =
        (*store)->RecordMeasurement(Measurement(key, "dev-a"), kT0);
    if (!result.ok() || result->duplicate) _exit(3);
    const std::string line = key + "\n";
    if (write(ack_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
  }
}

class StoreDurability : public ::testing::TestWithParam<Backend> {};

TEST_P(StoreDurability, KilledWriterLosesNoAcknowledgedMeasurementAndDuplicatesNone) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam(), /*sync_to_disk=*/true);
  ASSERT_THAT(url, IsOk());
  {
    auto store = OpenFleetStore(*url);
    ASSERT_THAT(store, IsOk());
    ASSERT_THAT((*store)->UpsertDevices({MakeDevice("dev-a", "x86_cpu", "w4a8-amx", kSeedCpu, kT0)}),
                IsOk());
  }  // closed before fork: no database handle crosses into the child

  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    RecordUntilKilled(*url, pipe_fds[1]);
  }
  close(pipe_fds[1]);

  std::string acked_text;
  auto complete_lines = [&] { return std::count(acked_text.begin(), acked_text.end(), '\n'); };
  char buffer[4096];
  bool killed = false;
  while (true) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // EOF: the child is gone
    acked_text.append(buffer, n);
    if (!killed && complete_lines() >= kAcksBeforeKill) {
      ASSERT_EQ(kill(child, SIGKILL), 0);  // mid-stream, likely inside a transaction
      killed = true;
    }
  }
  close(pipe_fds[0]);
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL)
      << "the writer stopped on its own with status " << wait_status;

  // Only whole lines are acknowledgements; a torn last line was not acked.
  std::vector<std::string> acked;
  for (absl::string_view line : absl::StrSplit(acked_text, '\n')) {
    if (!line.empty()) acked.emplace_back(line);
  }
  if (!acked_text.empty() && acked_text.back() != '\n') acked.pop_back();
  ASSERT_GE(acked.size(), static_cast<size_t>(kAcksBeforeKill));

  auto reopened = OpenFleetStore(*url);
  ASSERT_THAT(reopened, IsOk());
  auto rows = (*reopened)->ListMeasurements(absl::InfinitePast());
  ASSERT_THAT(rows, IsOk());
  std::map<std::string, int> copies;
  for (const StoredMeasurement& m : *rows) ++copies[m.idempotency_key];
  for (const std::string& key : acked) EXPECT_EQ(copies[key], 1) << key;
  // At most the one measurement in flight at the kill committed unacknowledged.
  EXPECT_LE(rows->size(), acked.size() + 1);

  // The agent never saw some acks and retries them: all are duplicates.
  for (const std::string& key : acked) {
    auto retry = (*reopened)->RecordMeasurement(Measurement(key, "dev-a"), kT0 + absl::Seconds(1));
    ASSERT_THAT(retry, IsOk());
    EXPECT_TRUE(retry->duplicate) << key;
  }
  EXPECT_THAT(*(*reopened)->ListMeasurements(absl::InfinitePast()), SizeIs(rows->size()));
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreDurability,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const auto& info) { return BackendName(info.param); });

// A server bounds each call's store work by the call's deadline
// (ScopedCallDeadline): a write waiting on a lock another connection holds
// gives up by then with UNAVAILABLE naming the store, instead of after the
// backend's own timeout, and nothing is written.
class StoreCallDeadline : public ::testing::TestWithParam<Backend> {};

TEST_P(StoreCallDeadline, AWriteBlockedByAnotherConnectionsLockEndsAtTheCallDeadline) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
  ASSERT_THAT(url, IsOk());
  auto store = OpenFleetStore(*url);
  ASSERT_THAT(store, IsOk());
  ASSERT_THAT((*store)->UpsertDevices({MakeDevice("dev-a", "x86_cpu", "w4a8-amx", kSeedCpu, kT0)}),
              IsOk());

  // Another process's transaction, holding what the insert needs.
  auto other = OpenSqlDatabase(*url);
  ASSERT_THAT(other, IsOk());
  auto holder = (*other)->Acquire();
  ASSERT_THAT(holder, IsOk());
  ASSERT_THAT((*holder)->Begin(/*for_write=*/true), IsOk());  // SQLite: the write lock
  if ((*other)->dialect() == SqlDialect::kPostgres) {
    ASSERT_THAT((*holder)->ExecScript("LOCK TABLE measurements IN EXCLUSIVE MODE"), IsOk());
  }

  constexpr absl::Duration kBudget = absl::Milliseconds(500);
  const absl::Time started = absl::Now();
  absl::StatusOr<RecordMeasurementResult> blocked = [&] {
    const ScopedCallDeadline deadline(started + kBudget);
    return (*store)->RecordMeasurement(Measurement("k-blocked", "dev-a"), kT0);
  }();
  const absl::Duration waited = absl::Now() - started;
  EXPECT_THAT(blocked, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("store")));
  EXPECT_GE(waited, kBudget * 0.8) << "gave up before the deadline";
  EXPECT_LT(waited, kBudget + absl::Seconds(2)) << "waited past the deadline";
  EXPECT_EQ(CallDeadline(), absl::InfiniteFuture()) << "the scope outlived its call";

  ASSERT_THAT((*holder)->Rollback(), IsOk());
  holder->reset();
  absl::StatusOr<RecordMeasurementResult> retried =
      (*store)->RecordMeasurement(Measurement("k-blocked", "dev-a"), kT0);
  ASSERT_THAT(retried, IsOk());
  EXPECT_FALSE(retried->duplicate) << "the refused write was stored after all";
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreCallDeadline,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const auto& info) { return BackendName(info.param); });

TEST(StoreReplicas, MeasurementThroughOneChangesVerificationSeenThroughTheOther) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(Backend::kPostgres, /*sync_to_disk=*/true);
  ASSERT_THAT(url, IsOk());
  auto replica_a = OpenFleetStore(*url);
  auto replica_b = OpenFleetStore(*url);
  ASSERT_THAT(replica_a, IsOk());
  ASSERT_THAT(replica_b, IsOk());
  const auto expectations = SeedExpectations(/*x86_policy_verified=*/false);
  const VerificationConfig config;
  const absl::Time now = kT0 + absl::Minutes(5);

  for (const char* id : {"a", "b", "c"}) {
    ASSERT_THAT((*replica_a)->UpsertDevices({MakeDevice(id, "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0)}),
                IsOk());
  }
  ASSERT_THAT((*replica_a)->RecordMeasurement(Measurement("m-a", "a"), now), IsOk());
  ASSERT_THAT((*replica_b)->RecordMeasurement(Measurement("m-b", "b"), now), IsOk());
  auto before = (*replica_b)->VerificationMatrix(expectations, config, now);
  ASSERT_THAT(before, IsOk());
  ASSERT_THAT(*before, SizeIs(1));
  EXPECT_FALSE((*before)[0].verified());

  ASSERT_THAT((*replica_a)->RecordMeasurement(Measurement("m-c", "c"), now), IsOk());
  auto after = (*replica_b)->VerificationMatrix(expectations, config, now);
  ASSERT_THAT(after, IsOk());
  ASSERT_THAT(*after, SizeIs(1));
  EXPECT_TRUE((*after)[0].verified());
  EXPECT_EQ((*after)[0].verification().device_count(), 3u);
  // The same report retried through the other replica is still one report.
  auto retry = (*replica_b)->RecordMeasurement(Measurement("m-c", "c"), now);
  ASSERT_THAT(retry, IsOk());
  EXPECT_TRUE(retry->duplicate);
}

TEST(StoreReplicas, StaleRolloutUpdateOnTheOtherReplicaIsAborted) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(Backend::kPostgres, /*sync_to_disk=*/true);
  ASSERT_THAT(url, IsOk());
  auto replica_a = OpenFleetStore(*url);
  auto replica_b = OpenFleetStore(*url);
  ASSERT_THAT(replica_a, IsOk());
  ASSERT_THAT(replica_b, IsOk());
  v1::Rollout rollout;
  rollout.set_id("fidelity-agentic");
  rollout.set_state(v1::ROLLOUT_STATE_PROGRESSING);
  ASSERT_THAT((*replica_a)->CreateRollout(rollout), IsOk());

  auto seen_by_b = (*replica_b)->GetRollout("fidelity-agentic");  // b reads revision 1
  ASSERT_THAT(seen_by_b, IsOk());
  v1::Rollout advanced = rollout;
  advanced.set_current_stage(1);
  ASSERT_THAT((*replica_a)->UpdateRollout(advanced, 1), IsOk());

  v1::Rollout paused = seen_by_b->rollout;
  paused.set_state(v1::ROLLOUT_STATE_PAUSED);
  EXPECT_THAT((*replica_b)->UpdateRollout(paused, seen_by_b->revision),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("stale")));
  auto now_b = (*replica_b)->GetRollout("fidelity-agentic");
  ASSERT_THAT(now_b, IsOk());
  EXPECT_EQ(now_b->rollout.current_stage(), 1u);  // a's update survived
  EXPECT_EQ(now_b->revision, 2);
}

// One server for both outages: each start of a PostgreSQL costs seconds.
class StoreUnavailable : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = TemporaryPostgres::Start(/*sync_to_disk=*/false);
    ASSERT_THAT(started, IsOk());
    server_ = started->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr) << "the test PostgreSQL did not start"; }
  static TemporaryPostgres* server_;
};
TemporaryPostgres* StoreUnavailable::server_ = nullptr;

TEST_F(StoreUnavailable, EveryPooledConnectionRecoversAfterARestart) {
  auto url = server_->CreateDatabase("restarting");
  ASSERT_THAT(url, IsOk());
  auto database = OpenSqlDatabase(*url);
  ASSERT_THAT(database, IsOk());
  {
    // Two sessions at once: the pool now holds two open connections.
    auto first = (*database)->Acquire();
    auto second = (*database)->Acquire();
    ASSERT_THAT(first, IsOk());
    ASSERT_THAT(second, IsOk());
    ASSERT_THAT((*first)->Query("SELECT 1").status(), IsOk());
    ASSERT_THAT((*second)->Query("SELECT 1").status(), IsOk());
  }
  ASSERT_THAT(server_->Stop(), IsOk());
  ASSERT_THAT(server_->StartAgain(), IsOk());
  // The first use finds its connection broken; no later one may fail for it.
  for (int i = 0; i < 4; ++i) {
    auto session = (*database)->Acquire();
    ASSERT_THAT(session, IsOk());
    absl::Status status = (*session)->Query("SELECT 1").status();
    if (i == 0) {
      EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable));
    } else {
      EXPECT_THAT(status, IsOk()) << "use " << i;
    }
  }
}

TEST_F(StoreUnavailable, ADatabaseThatGoesAwayTurnsIntoUnavailableAndBackIntoService) {
  auto url = server_->CreateDatabase("going_away");
  ASSERT_THAT(url, IsOk());
  auto store = OpenFleetStore(*url);
  ASSERT_THAT(store, IsOk());
  ASSERT_THAT((*store)->UpsertDevices({MakeDevice("dev-a", "x86_cpu", "w4a8-amx", kSeedCpu, kT0)}), IsOk());
  ASSERT_THAT((*store)->Ping(), IsOk());

  ASSERT_THAT(server_->Stop(), IsOk());  // pg_ctl stop -m fast
  EXPECT_THAT((*store)->RecordMeasurement(Measurement("k", "dev-a"), kT0),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT((*store)->Ping(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT((*store)->GetDevice("dev-a"), StatusIs(absl::StatusCode::kUnavailable));

  // Back up: the same store object reconnects; the agent's retry is recorded once.
  ASSERT_THAT(server_->StartAgain(), IsOk());
  EXPECT_THAT((*store)->Ping(), IsOk());
  auto retried = (*store)->RecordMeasurement(Measurement("k", "dev-a"), kT0);
  ASSERT_THAT(retried, IsOk());
  EXPECT_FALSE(retried->duplicate);
  EXPECT_THAT(*(*store)->ListMeasurements(absl::InfinitePast()), SizeIs(1));
}

}  // namespace
}  // namespace weightpath::store::testing
