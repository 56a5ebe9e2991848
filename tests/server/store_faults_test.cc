// The fleet store failing under a running weightpath-server, with real
// processes and real faults (tests/README.md, "Faults with real processes"):
//
// - PostgreSQL stopped (pg_ctl stop -m fast, then -m immediate) and started
//   again while client threads resolve and report;
// - the SQLite volume full: a small tmpfs filled to the last byte where this
//   machine lets the test mount one, and the server's RLIMIT_FSIZE lowered
//   under its files (prlimit(2), no privilege needed) everywhere.
//
// What must hold: every resolve answers OK throughout; a report answers OK or
// UNAVAILABLE naming the store, never anything else, and once the store is
// back the same reports succeed; every report the server acknowledged is in
// the database exactly once; a device seen only while the store was away is
// still registered afterwards, so its first report is taken.
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/store/temporary_postgres.h"

namespace weightpath::server::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kPostgresBin[] = "/usr/lib/postgresql/15/bin";
// Reports each load phase waits for: enough that every client thread took
// part, few enough for a 2-core CI machine to get there in well under a second.
constexpr int kAcksPerPhase = 24;
constexpr int kRefusalsPerFault = 12;
constexpr int kResolvesPerFault = 20;
// Generous: a loaded CI machine, or the ASan build, is slow.
constexpr absl::Duration kPhaseTimeout = absl::Seconds(60);

std::vector<std::string> ServerFlags(const std::string& store_url) {
  // A short flush period and refresh: the registry and the store's health
  // follow the fault within a fraction of a second.
  return {"--store=" + store_url, "--fleet_refresh_interval=200ms",
          "--registry_flush_period=100ms"};
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
    ASSERT_TRUE(Eventually([&] { return (*fleet)->GetDevice(device).ok(); }, kPhaseTimeout))
        << device;
  }
}

double Metric(const ServerProcess& server, const std::string& series) {
  absl::StatusOr<std::string> metrics = HttpGet(server.metrics_address(), "/metrics");
  if (!metrics.ok()) return -1;
  return SampleValue(*metrics, series).value_or(-1);
}

double StoreUp(const ServerProcess& server) { return Metric(server, "weightpath_store_up"); }

constexpr char kFailedBatches[] = "weightpath_fleet_flush_failed_batches_total";

// A device that first resolves while the store is away; returns once the
// registry has tried (and failed) to write it.
void ResolveWhileTheStoreIsAway(const std::string& address, const ServerProcess& server,
                                const std::string& device) {
  const double failed_before = Metric(server, kFailedBatches);
  auto stub = v1::WeightPath::NewStub(PlaintextChannel(address));
  v1::ResolveWeightPathResponse response;
  const grpc::Status resolve = CallResolve(*stub, ArmRequest(device), &response);
  EXPECT_TRUE(resolve.ok()) << resolve.error_message();
  EXPECT_TRUE(response.has_weight_path());
  // The write-behind batch holding it is refused (the metric follows the
  // server's refresh, every 200 ms here).
  EXPECT_TRUE(Eventually([&] { return Metric(server, kFailedBatches) > failed_before + 1; },
                         kPhaseTimeout));
}

// Agents against the server: each reporter sends measurements with fresh
// idempotency keys and retries a key answered UNAVAILABLE until it is
// acknowledged (as weightpath-agent run does); resolvers call
// ResolveWeightPath for their devices. Everything is timestamped, so a test
// can ask what happened during a fault.
class FleetLoad {
 public:
  FleetLoad(const std::string& address, std::vector<std::string> reporters,
            std::vector<std::string> resolved)
      : channel_(PlaintextChannel(address)) {
    for (size_t i = 0; i < reporters.size(); ++i) {
      threads_.emplace_back([this, device = reporters[i]] { Report(device); });
    }
    for (size_t i = 0; i < 2; ++i) {
      threads_.emplace_back([this, resolved, i] { Resolve(resolved, i); });
    }
  }
  ~FleetLoad() { Stop(); }

  void Stop() {
    stop_ = true;
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }

  int AcksSince(absl::Time since) const { return Count(acks_, since); }
  int RefusalsSince(absl::Time since) const { return Count(refusals_, since); }
  int ResolvesSince(absl::Time since) const { return Count(resolves_, since); }
  // When the first report after `since` was acknowledged.
  absl::Time FirstAckAfter(absl::Time since) const {
    std::lock_guard lock(mutex_);
    for (const Event& event : acks_) {
      if (event.at >= since) return event.at;
    }
    return absl::InfiniteFuture();
  }

  std::vector<std::string> UnexpectedSoFar() const {
    std::lock_guard lock(mutex_);
    return unexpected_;
  }

  // After Stop().
  const std::set<std::string>& acknowledged() const { return acknowledged_; }
  const std::set<std::string>& sent() const { return sent_; }
  int duplicates() const { return duplicates_; }
  int refusals() const { return static_cast<int>(refusals_.size()); }
  int resolves() const { return static_cast<int>(resolves_.size()); }
  // Refusal messages, one of each.
  const std::set<std::string>& refusal_messages() const { return refusal_messages_; }
  // Anything but OK and UNAVAILABLE from a report, and any failed resolve.
  const std::vector<std::string>& unexpected() const { return unexpected_; }

 private:
  struct Event {
    absl::Time at;
  };

  int Count(const std::vector<Event>& events, absl::Time since) const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(std::count_if(events.begin(), events.end(),
                                          [&](const Event& event) { return event.at >= since; }));
  }

  void Pause() { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

  void Report(const std::string& device) {
    auto stub = v1::WeightPath::NewStub(channel_);
    for (int n = 0; !stop_;) {
      const std::string key = absl::StrCat(device, "-report-", n);
      {
        std::lock_guard lock(mutex_);
        sent_.insert(key);
      }
      v1::ReportMeasurementResponse response;
      auto context = ContextWithDeadline(15);
      const grpc::Status status = stub->ReportMeasurement(
          context.get(), Measurement(key, device, "w4a16-tinygemm", 30 + n % 5, 16), &response);
      std::lock_guard lock(mutex_);
      if (status.ok()) {
        acks_.push_back({absl::Now()});
        acknowledged_.insert(key);
        if (response.duplicate()) ++duplicates_;
        ++n;
      } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
        refusals_.push_back({absl::Now()});
        if (refusal_messages_.size() < 20) refusal_messages_.insert(status.error_message());
        // The same key again, as an agent retries it.
      } else {
        unexpected_.push_back(absl::StrCat("ReportMeasurement ", key, ": code ",
                                           status.error_code(), ": ", status.error_message()));
        ++n;
      }
      Pause();
    }
  }

  void Resolve(const std::vector<std::string>& devices, size_t first) {
    auto stub = v1::WeightPath::NewStub(channel_);
    for (size_t i = first; !stop_; i += 2) {
      const std::string& device = devices[i % devices.size()];
      v1::ResolveWeightPathResponse response;
      const grpc::Status status = CallResolve(*stub, ArmRequest(device), &response);
      {
        std::lock_guard lock(mutex_);
        if (status.ok() && response.has_weight_path()) {
          resolves_.push_back({absl::Now()});
        } else {
          unexpected_.push_back(absl::StrCat("ResolveWeightPath ", device, ": code ",
                                             status.error_code(), ": ", status.error_message()));
        }
      }
      Pause();
    }
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  mutable std::mutex mutex_;
  std::vector<Event> acks_;
  std::vector<Event> refusals_;
  std::vector<Event> resolves_;
  std::set<std::string> acknowledged_;
  std::set<std::string> sent_;
  int duplicates_ = 0;
  std::set<std::string> refusal_messages_;
  std::vector<std::string> unexpected_;
};

// Every acknowledged report is stored exactly once; nothing is stored that
// was not sent, and nothing twice.
void ExpectEveryAcknowledgedReportStoredOnce(const std::string& url, const FleetLoad& load) {
  absl::StatusOr<std::unique_ptr<store::FleetStore>> fleet = store::OpenFleetStore(url);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  absl::StatusOr<std::vector<store::StoredMeasurement>> stored =
      (*fleet)->ListMeasurements(absl::InfinitePast());
  ASSERT_TRUE(stored.ok()) << stored.status();
  std::map<std::string, int> copies;
  for (const store::StoredMeasurement& measurement : *stored) ++copies[measurement.idempotency_key];
  int lost = 0;
  for (const std::string& key : load.acknowledged()) {
    if (copies[key] != 1) ++lost;
    EXPECT_EQ(copies[key], 1) << key << " was acknowledged";
  }
  EXPECT_EQ(lost, 0);
  for (const auto& [key, count] : copies) {
    if (key.rfind("late-", 0) == 0) continue;  // the probe below, not the load
    EXPECT_EQ(count, 1) << key;
    EXPECT_TRUE(load.sent().count(key) > 0) << key << " stored but never sent";
  }
}

// A report from `device`, retried while it is refused UNAVAILABLE (as an
// agent does), for up to kPhaseTimeout; the last answer.
grpc::Status ReportUntilTaken(const std::string& address, const std::string& device,
                              v1::ReportMeasurementResponse* response) {
  auto stub = v1::WeightPath::NewStub(PlaintextChannel(address));
  grpc::Status status;
  Eventually(
      [&] {
        status = Report(*stub, Measurement(device + "-first", device, "w4a16-tinygemm", 31, 16),
                        response);
        return status.error_code() != grpc::StatusCode::UNAVAILABLE;
      },
      kPhaseTimeout);
  return status;
}

// For a failed wait: what went wrong so far.
std::string Describe(const FleetLoad& load, const ServerProcess& server) {
  std::string text = server.Running() ? "the server runs" : "the server has ended";
  const std::vector<std::string> unexpected = load.UnexpectedSoFar();
  absl::StrAppend(&text, "; ", unexpected.size(), " unexpected answers");
  for (size_t i = 0; i < unexpected.size() && i < 5; ++i) {
    absl::StrAppend(&text, "\n  ", unexpected[i]);
  }
  absl::StrAppend(&text, "\nserver log:\n", server.Log());
  return text;
}

struct Figures {
  int refused = 0;
  absl::Duration recovery;
};

// --- PostgreSQL stopped and started again under load ------------------------

bool PostgresInstalled() {
  return ::access((std::string(kPostgresBin) + "/pg_ctl").c_str(), X_OK) == 0 &&
         ::access((std::string(kPostgresBin) + "/initdb").c_str(), X_OK) == 0;
}

TEST(ServerStoreFaults, PostgresStoppedAndStartedAgainUnderLoad) {
  if (!PostgresInstalled()) {
    GTEST_SKIP() << "PostgreSQL 15 is not installed (no " << kPostgresBin
                 << "/pg_ctl): scripts/install-deps installs postgresql-15";
  }
  absl::StatusOr<std::unique_ptr<store::testing::TemporaryPostgres>> postgres =
      store::testing::TemporaryPostgres::Start(/*sync_to_disk=*/false);
  ASSERT_TRUE(postgres.ok()) << postgres.status();
  absl::StatusOr<std::string> url = (*postgres)->CreateDatabase("store_faults");
  ASSERT_TRUE(url.ok()) << url.status();
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(ServerFlags(*url));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->grpc_address();

  const std::vector<std::string> reporters = {"pg-0", "pg-1", "pg-2", "pg-3"};
  std::vector<std::string> resolved = reporters;
  for (int i = 0; i < 8; ++i) resolved.push_back(absl::StrCat("pg-resolver-", i));
  RegisterDevices(address, *url, reporters);
  FleetLoad load(address, reporters, resolved);
  const absl::Time started = absl::Now();
  ASSERT_TRUE(Eventually([&] { return load.AcksSince(started) >= kAcksPerPhase; }, kPhaseTimeout));

  std::map<std::string, Figures> figures;
  for (const std::string mode : {"fast", "immediate"}) {
    SCOPED_TRACE("pg_ctl stop -m " + mode);
    const absl::Time down = absl::Now();
    ASSERT_TRUE((*postgres)->Stop(mode).ok());
    // Reports are refused and resolves go on, for as long as it is away.
    ASSERT_TRUE(
        Eventually([&] { return load.RefusalsSince(down) >= kRefusalsPerFault; }, kPhaseTimeout))
        << Describe(load, **server);
    ASSERT_TRUE(
        Eventually([&] { return load.ResolvesSince(down) >= kResolvesPerFault; }, kPhaseTimeout));
    EXPECT_TRUE(Eventually([&] { return StoreUp(**server) == 0; }, kPhaseTimeout));
    // A device that first resolves while the store is away.
    const std::string late = "late-" + mode;
    ResolveWhileTheStoreIsAway(address, **server, late);

    const absl::Time back = absl::Now();
    ASSERT_TRUE((*postgres)->StartAgain().ok());
    const absl::Time ready = absl::Now();
    ASSERT_TRUE(Eventually([&] { return load.AcksSince(ready) >= kAcksPerPhase; }, kPhaseTimeout))
        << Describe(load, **server);
    EXPECT_TRUE(Eventually([&] { return StoreUp(**server) == 1; }, kPhaseTimeout));
    // The late device's first report is taken: its registry record waited
    // for the store instead of being dropped with a failed batch.
    v1::ReportMeasurementResponse first_report;
    const grpc::Status taken = ReportUntilTaken(address, late, &first_report);
    EXPECT_TRUE(taken.ok()) << taken.error_code() << ": " << taken.error_message();
    figures[mode] = {load.RefusalsSince(down) - load.RefusalsSince(ready),
                     load.FirstAckAfter(ready) - ready};
    RecordProperty("postgres_" + mode + "_outage_ms",
                   static_cast<int>(absl::ToInt64Milliseconds(back - down)));
  }
  load.Stop();

  EXPECT_THAT(load.unexpected(), ::testing::IsEmpty());
  EXPECT_FALSE(load.refusal_messages().empty());
  for (const std::string& message : load.refusal_messages()) {
    // Named, but not where it is: a device sees no URL, host or user.
    EXPECT_THAT(message, HasSubstr("fleet store")) << message;
    EXPECT_THAT(message, ::testing::Not(HasSubstr("postgres://"))) << message;
    EXPECT_THAT(message, ::testing::Not(HasSubstr("127.0.0.1"))) << message;
  }
  ExpectEveryAcknowledgedReportStoredOnce(*url, load);
  for (const auto& [mode, figure] : figures) {
    RecordProperty("postgres_" + mode + "_refused", figure.refused);
    RecordProperty("postgres_" + mode + "_recovery_ms",
                   static_cast<int>(absl::ToInt64Milliseconds(figure.recovery)));
    std::printf(
        "pg_ctl stop -m %s: %d reports refused; first acknowledged %lld ms after the "
        "restart\n",
        mode.c_str(), figure.refused,
        static_cast<long long>(absl::ToInt64Milliseconds(figure.recovery)));
  }
  std::printf(
      "PostgreSQL: %zu reports acknowledged (%d of them duplicates of a refused "
      "attempt), %d refused, %d resolves, all OK\n",
      load.acknowledged().size(), load.duplicates(), load.refusals(), load.resolves());
}

// --- The SQLite volume full --------------------------------------------------

enum class Squeeze {
  kTmpfs,          // a small tmpfs, filled to the last byte by a ballast file
  kFileSizeLimit,  // the server's RLIMIT_FSIZE lowered under its files
};

std::string SqueezeName(Squeeze squeeze) {
  return squeeze == Squeeze::kTmpfs ? "FullTmpfs" : "FileSizeLimit";
}

// Room for the store's files (the WAL grows to ~4 MB before a checkpoint)
// and little more: the ballast fills the rest.
constexpr char kTmpfsOptions[] = "size=16m,mode=0755";
// RLIMIT_FSIZE while "full": no file of the server may grow past its first
// page, so every WAL append fails (EFBIG; SQLite: disk I/O error or full).
constexpr rlim_t kSqueezedFileSize = 4096;

class ServerSqliteVolumeFull : public ::testing::TestWithParam<Squeeze> {
 protected:
  void SetUp() override {
    volume_ = dir_.File("volume");
    std::filesystem::create_directories(volume_);
    if (GetParam() == Squeeze::kTmpfs) {
      if (::mount("tmpfs", volume_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, kTmpfsOptions) != 0) {
        GTEST_SKIP() << "cannot mount a tmpfs on " << volume_ << " (" << std::strerror(errno)
                     << "; needs root or CAP_SYS_ADMIN): the FileSizeLimit case refuses the "
                        "writes with RLIMIT_FSIZE instead";
      }
      mounted_ = true;
    }
  }
  void TearDown() override {
    server_.reset();
    if (mounted_) ::umount2(volume_.c_str(), MNT_DETACH);
  }

  std::string db() const { return volume_ + "/fleet.db"; }
  std::string url() const { return "sqlite:" + db(); }

  // The volume is full from here until FreeVolume().
  void FillVolume() {
    if (GetParam() == Squeeze::kTmpfs) {
      const std::string ballast = volume_ + "/ballast";
      const int fd = ::open(ballast.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      ASSERT_GE(fd, 0) << std::strerror(errno);
      const std::string chunk(64 * 1024, 'x');
      size_t filled = 0;
      for (;;) {
        const ssize_t wrote = ::write(fd, chunk.data(), chunk.size());
        if (wrote > 0) {
          filled += static_cast<size_t>(wrote);
          continue;
        }
        ASSERT_EQ(errno, ENOSPC) << std::strerror(errno);
        break;
      }
      // Down to the last page: what a short write left is filled one byte at
      // a time (tmpfs allocates whole pages, so this ends at once).
      while (::write(fd, "x", 1) == 1) ++filled;
      ::close(fd);
      RecordProperty("ballast_bytes", static_cast<int>(filled));
      return;
    }
    rlimit limit{};
    ASSERT_EQ(::prlimit(server_->pid(), RLIMIT_FSIZE, nullptr, &limit), 0) << std::strerror(errno);
    saved_limit_ = limit;
    limit.rlim_cur = kSqueezedFileSize;
    ASSERT_EQ(::prlimit(server_->pid(), RLIMIT_FSIZE, &limit, nullptr), 0) << std::strerror(errno);
  }

  void FreeVolume() {
    if (GetParam() == Squeeze::kTmpfs) {
      ASSERT_EQ(::unlink((volume_ + "/ballast").c_str()), 0) << std::strerror(errno);
      return;
    }
    ASSERT_EQ(::prlimit(server_->pid(), RLIMIT_FSIZE, &saved_limit_, nullptr), 0)
        << std::strerror(errno);
  }

  TempDir dir_;
  std::string volume_;
  bool mounted_ = false;
  rlimit saved_limit_{};
  std::unique_ptr<ServerProcess> server_;
};

TEST_P(ServerSqliteVolumeFull, ReportsAreRefusedResolvesGoOnAndNothingAcknowledgedIsLost) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(ServerFlags(url()));
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  const std::string address = server_->grpc_address();

  const std::vector<std::string> reporters = {"lite-0", "lite-1", "lite-2", "lite-3"};
  std::vector<std::string> resolved = reporters;
  for (int i = 0; i < 8; ++i) resolved.push_back(absl::StrCat("lite-resolver-", i));
  RegisterDevices(address, url(), reporters);
  FleetLoad load(address, reporters, resolved);
  const absl::Time started = absl::Now();
  ASSERT_TRUE(Eventually([&] { return load.AcksSince(started) >= kAcksPerPhase; }, kPhaseTimeout));

  const absl::Time full = absl::Now();
  FillVolume();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(
      Eventually([&] { return load.RefusalsSince(full) >= kRefusalsPerFault; }, kPhaseTimeout))
      << Describe(load, *server_);
  // Refused from some moment on: a while later, no report is taken.
  const absl::Time refusing = absl::Now();
  ASSERT_TRUE(
      Eventually([&] { return load.RefusalsSince(refusing) >= kRefusalsPerFault; }, kPhaseTimeout))
      << Describe(load, *server_);
  EXPECT_EQ(load.AcksSince(refusing), 0) << "a report was taken on a full volume";
  ASSERT_TRUE(
      Eventually([&] { return load.ResolvesSince(full) >= kResolvesPerFault; }, kPhaseTimeout))
      << Describe(load, *server_);
  ResolveWhileTheStoreIsAway(address, *server_, "late-sqlite");
  ASSERT_TRUE(server_->Running()) << "the server died on a full volume:\n" << server_->Log();

  const absl::Time relieved = absl::Now();
  FreeVolume();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(Eventually([&] { return load.AcksSince(relieved) >= kAcksPerPhase; }, kPhaseTimeout))
      << Describe(load, *server_);
  EXPECT_TRUE(Eventually([&] { return StoreUp(*server_) == 1; }, kPhaseTimeout));
  v1::ReportMeasurementResponse first_report;
  const grpc::Status taken = ReportUntilTaken(address, "late-sqlite", &first_report);
  EXPECT_TRUE(taken.ok()) << taken.error_code() << ": " << taken.error_message();
  load.Stop();

  EXPECT_THAT(load.unexpected(), ::testing::IsEmpty());
  EXPECT_FALSE(load.refusal_messages().empty());
  for (const std::string& message : load.refusal_messages()) {
    EXPECT_THAT(message, HasSubstr("fleet store")) << message;
    EXPECT_THAT(message, ::testing::Not(HasSubstr(db()))) << "a device is told no server path";
  }
  ExpectEveryAcknowledgedReportStoredOnce(url(), load);
  const absl::Duration recovery = load.FirstAckAfter(relieved) - relieved;
  RecordProperty("recovery_ms", static_cast<int>(absl::ToInt64Milliseconds(recovery)));
  std::printf(
      "%s: %zu reports acknowledged (%d duplicates of a refused attempt), %d refused "
      "(%d while full), %d resolves all OK; first acknowledged %lld ms after space "
      "returned; refusals: %s\n",
      SqueezeName(GetParam()).c_str(), load.acknowledged().size(), load.duplicates(),
      load.refusals(), load.RefusalsSince(full) - load.RefusalsSince(relieved), load.resolves(),
      static_cast<long long>(absl::ToInt64Milliseconds(recovery)),
      load.refusal_messages().empty() ? "" : load.refusal_messages().begin()->c_str());
}

INSTANTIATE_TEST_SUITE_P(Squeezes, ServerSqliteVolumeFull,
                         ::testing::Values(Squeeze::kTmpfs, Squeeze::kFileSizeLimit),
                         [](const auto& info) { return SqueezeName(info.param); });

}  // namespace
}  // namespace weightpath::server::testing
