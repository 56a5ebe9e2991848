// bench_store: loads a registry of N devices into a FleetStore and prints
// what it cost (rate, size on disk, RSS), then the sustained rate of durable
// RecordMeasurement calls from 1 and several threads. A command to run by
// hand (see bench/RESULTS-store.md), not a test.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "store/sql_database.h"
#include "store/store.h"
#include "store/time_convert.h"

ABSL_FLAG(std::string, store, "", "store URL: sqlite:FILE or postgres://...");
ABSL_FLAG(int64_t, devices, 1000000, "devices to register");
ABSL_FLAG(int64_t, batch, 500, "devices per UpsertDevices call (the write-behind batch)");
ABSL_FLAG(int64_t, measurements, 2000, "RecordMeasurement calls per thread-count run");
ABSL_FLAG(std::string, threads, "1,4", "comma-separated client thread counts");
ABSL_FLAG(int64_t, running_reports, 20000,
          "devices that report what they run (one durable RecordOutcome each; every tenth "
          "reports another build than assigned), before CountRunning is timed");

namespace weightpath::store {
namespace {

// The registry is loaded as last seen a day ago, spread over an hour: a
// resolve during the benchmark is newer than every stored row, so it really
// rewrites the row (a last_seen in the future would make every upsert a
// no-op, which is how an earlier version of this tool flattered the
// registry's cost).
const absl::Time kSeen = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()) - 25 * 3600);

v1::Device FleetDevice(int64_t i) {
  // A fleet mix: mostly x86 CPUs (a third with AMX), some Arm, a few GPUs.
  static const char* const kClasses[] = {"x86_cpu", "x86_cpu", "x86_cpu", "arm64_cpu", "cuda_discrete"};
  const std::string hardware_class = kClasses[i % 5];
  v1::Device device;
  device.set_device_id(absl::StrFormat("dev-%08d", i));
  device.set_hardware_class(hardware_class);
  const bool amx = hardware_class == "x86_cpu" && i % 3 == 0;
  device.set_path(hardware_class == "cuda_discrete" ? "bf16" : amx ? "w4a8-amx" : "w4a16-tinygemm");
  (*device.mutable_labels())["site"] = absl::StrCat("site-", i % 97);
  if (i % 10 == 0) (*device.mutable_labels())["workload"] = "agentic";
  v1::ProfileSummary* profile = device.mutable_profile();
  profile->set_arch(hardware_class == "arm64_cpu" ? "aarch64" : "x86_64");
  profile->set_cpu_model(amx ? "Intel(R) Xeon(R) Platinum 8480C" : "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz");
  for (const char* flag : {"avx2", "avx512f", "avx512_bf16", "amx_tile"}) profile->add_cpu_flags(flag);
  profile->set_accelerator(hardware_class == "cuda_discrete" ? "cuda_discrete" : "none");
  device.set_model("Spark-X2.5-1.7B");
  device.mutable_artifact()->set_uri(absl::StrCat("https://artifacts.example/spark/", device.path(), ".tar"));
  device.mutable_artifact()->set_sha256(std::string(64, 'e'));
  device.mutable_artifact()->set_size_bytes(1'100'000'000);
  device.mutable_artifact()->set_version("2026.11.1");
  device.set_policy_version("sha256:0123456789abcdef");
  device.set_agent_version("0.1.0");
  device.set_effective_priority(v1::PRIORITY_SPEED);
  *device.mutable_last_seen() = ToTimestamp(kSeen + absl::Seconds(i % 3600));
  return device;
}

std::string ProcStatus(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::string(absl::StripAsciiWhitespace(line.substr(strlen(field) + 1)));
  }
  return "?";
}

int64_t FileSize(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 ? info.st_size : 0;
}

void PrintDiskSize(const std::string& url) {
  if (url.rfind("sqlite:", 0) == 0) {
    const std::string file = url.substr(7);
    std::printf("registry on disk: %.1f MiB (%s %lld B + wal %lld B)\n",
                (FileSize(file) + FileSize(file + "-wal")) / 1048576.0, file.c_str(),
                static_cast<long long>(FileSize(file)), static_cast<long long>(FileSize(file + "-wal")));
    return;
  }
  auto database = OpenSqlDatabase(url);
  if (!database.ok()) return;
  auto session = (*database)->Acquire();
  if (!session.ok()) return;
  auto rows = (*session)->Query(
      "SELECT pg_total_relation_size('devices') + pg_total_relation_size('device_sightings'), "
      "pg_database_size(current_database())");
  if (rows.ok() && !rows->empty()) {
    double devices = 0, total = 0;
    (void)absl::SimpleAtod(CellText((*rows)[0][0]), &devices);
    (void)absl::SimpleAtod(CellText((*rows)[0][1]), &total);
    std::printf("registry on disk: devices and device_sightings with indexes %.1f MiB, whole database %.1f MiB\n",
                devices / 1048576.0, total / 1048576.0);
  }
}

template <typename F>
double Seconds(F&& work) {
  const absl::Time start = absl::Now();
  work();
  return absl::ToDoubleSeconds(absl::Now() - start);
}

int Run() {
  const std::string url = absl::GetFlag(FLAGS_store);
  if (url.empty()) {
    std::fprintf(stderr, "--store is required\n");
    return 2;
  }
  auto opened = OpenFleetStore(url);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  FleetStore& store = **opened;
  const int64_t devices = absl::GetFlag(FLAGS_devices);
  const int64_t batch_size = absl::GetFlag(FLAGS_batch);
  std::printf("backend: %s, devices: %lld, batch: %lld\n", std::string(store.backend()).c_str(),
              static_cast<long long>(devices), static_cast<long long>(batch_size));

  // 1. Bulk registration, in write-behind sized batches.
  const double load_seconds = Seconds([&] {
    std::vector<v1::Device> batch;
    for (int64_t i = 0; i < devices; ++i) {
      batch.push_back(FleetDevice(i));
      if (static_cast<int64_t>(batch.size()) == batch_size || i + 1 == devices) {
        absl::Status status = store.UpsertDevices(batch);
        if (!status.ok()) {
          std::fprintf(stderr, "upsert: %s\n", status.ToString().c_str());
          std::exit(1);
        }
        batch.clear();
      }
    }
  });
  std::printf("bulk upsert: %.0f devices/s (%.1f s)\n", devices / load_seconds, load_seconds);
  std::printf("process RSS after load: VmRSS %s, VmHWM %s\n", ProcStatus("VmRSS").c_str(),
              ProcStatus("VmHWM").c_str());
  PrintDiskSize(url);
  if (url.rfind("sqlite:", 0) != 0) {
    // What autovacuum does within a minute of a bulk load. Without current
    // statistics PostgreSQL plans a class page as if the class held a few
    // hundred devices (sort instead of index order: 0.94 s instead of ms).
    auto database = OpenSqlDatabase(url);
    if (database.ok()) {
      auto session = (*database)->Acquire();
      if (session.ok()) (void)(*session)->Query("ANALYZE");
    }
  }

  // 2. Reads operators and the gauge make over the whole registry.
  absl::StatusOr<v1::FleetSummaryResponse> summary;
  const double summary_seconds = Seconds([&] { summary = store.FleetSummary(absl::InfinitePast()); });
  std::printf("FleetSummary over %llu devices: %.3f s (%d cells)\n",
              summary.ok() ? static_cast<unsigned long long>(summary->total_devices()) : 0ULL,
              summary_seconds, summary.ok() ? summary->cells_size() : -1);
  // What the devices-seen refresh adds with running reports: CountRunning
  // beside the FleetSummary count it already makes, and the drift listing.
  const int64_t reporting = std::min(devices, absl::GetFlag(FLAGS_running_reports));
  const double report_seconds = Seconds([&] {
    for (int64_t i = 0; i < reporting; ++i) {
      const v1::Device device = FleetDevice(i);
      v1::ReportOutcomeRequest report;
      report.set_idempotency_key(absl::StrCat("running-", i));
      report.set_device_id(device.device_id());
      report.set_outcome(i % 10 == 0 ? v1::OUTCOME_ROLLED_BACK : v1::OUTCOME_ENGINE_STARTED);
      report.set_path(device.path());
      v1::RunningBuild* running = report.mutable_running();
      running->set_path(i % 10 == 0 ? "bf16" : device.path());
      running->set_model(device.model());
      running->set_artifact_sha256(device.artifact().sha256());
      running->set_source(v1::BOOT_SOURCE_SERVER);
      if (absl::StatusOr<bool> recorded = store.RecordOutcome(report, absl::Now()); !recorded.ok()) {
        std::fprintf(stderr, "running report: %s\n", recorded.status().ToString().c_str());
        std::exit(1);
      }
    }
  });
  std::printf("running reports (RecordOutcome with running, 1 thread): %.0f/s (%lld in %.1f s)\n",
              reporting / report_seconds, static_cast<long long>(reporting), report_seconds);
  // A/B in one run: the same report with and without `running` (one upsert
  // more in the report's transaction), interleaved in rounds of 100.
  double with_seconds = 0, without_seconds = 0;
  int64_t ab_reports = 0;
  for (int round = 0; round < 10; ++round) {
    for (bool with_running : {false, true}) {
      const double seconds = Seconds([&] {
        for (int64_t i = 0; i < 100; ++i) {
          const v1::Device device = FleetDevice((round * 100 + i) % devices);
          v1::ReportOutcomeRequest report;
          report.set_idempotency_key(absl::StrCat("ab-", round, "-", with_running, "-", i));
          report.set_device_id(device.device_id());
          report.set_outcome(v1::OUTCOME_ENGINE_STARTED);
          report.set_path(device.path());
          if (with_running) {
            report.mutable_running()->set_path(device.path());
            report.mutable_running()->set_model(device.model());
            report.mutable_running()->set_source(v1::BOOT_SOURCE_SERVER);
          }
          (void)store.RecordOutcome(report, absl::Now());
        }
      });
      (with_running ? with_seconds : without_seconds) += seconds;
    }
    ab_reports += 100;
  }
  std::printf("RecordOutcome A/B, %lld each, interleaved: without running %.0f/s, with running "
              "%.0f/s\n",
              static_cast<long long>(ab_reports), ab_reports / without_seconds,
              ab_reports / with_seconds);
  absl::StatusOr<RunningCounts> running;
  const double running_seconds = Seconds(
      [&] { running = store.CountRunning(absl::InfinitePast(), absl::Now() - absl::Hours(1)); });
  uint64_t drifted = 0;
  if (running.ok()) {
    for (const auto& [key, count] : running->drifted) drifted += count.devices;
  }
  std::printf("CountRunning over %lld devices (%lld reporting, %llu drifted): %.3f s\n",
              static_cast<long long>(devices), static_cast<long long>(reporting),
              static_cast<unsigned long long>(drifted), running_seconds);
  DeviceQuery drift_query;
  drift_query.drifted_only = true;
  drift_query.page_size = 1000;
  const double drift_page_seconds = Seconds([&] { (void)store.ListDevices(drift_query); });
  std::printf("ListDevices(drifted_only, page_size=1000): %.4f s\n", drift_page_seconds);

  DeviceQuery page_query;
  page_query.hardware_class = "arm64_cpu";
  page_query.page_size = 1000;
  const double page_seconds = Seconds([&] { (void)store.ListDevices(page_query); });
  std::printf("ListDevices(class=arm64_cpu, page_size=1000): %.4f s\n", page_seconds);

  // 3. Durable measurements: each call commits before it returns.
  const int64_t per_run = absl::GetFlag(FLAGS_measurements);
  int run = 0;
  for (absl::string_view text : absl::StrSplit(absl::GetFlag(FLAGS_threads), ',')) {
    int threads = 0;
    if (!absl::SimpleAtoi(text, &threads) || threads <= 0) continue;
    std::atomic<int64_t> next{0}, failures{0};
    std::vector<double> latencies(per_run);
    const double seconds = Seconds([&] {
      std::vector<std::thread> workers;
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
          std::mt19937_64 random(t + 1000 * run);
          while (true) {
            const int64_t n = next.fetch_add(1);
            if (n >= per_run) return;
            v1::ReportMeasurementRequest request;
            request.set_idempotency_key(absl::StrCat("bench-", run, "-", n));
            request.set_device_id(absl::StrFormat("dev-%08d", random() % devices));
            request.set_model("Spark-X2.5-1.7B");
            request.set_path("w4a8-amx");
            request.set_decode_tok_s(80 + (random() % 100) / 10.0);
            request.set_step_ms(11.55);
            request.set_threads(24);
            request.set_fidelity_exact_matches(1);
            request.set_fidelity_prompts(12);
            const absl::Time start = absl::Now();
            if (!store.RecordMeasurement(request, start).ok()) failures.fetch_add(1);
            latencies[n] = absl::ToDoubleMilliseconds(absl::Now() - start);
          }
        });
      }
      for (auto& worker : workers) worker.join();
    });
    std::sort(latencies.begin(), latencies.end());
    std::printf("RecordMeasurement, %d thread(s): %.0f durable commits/s over %lld calls "
                "(p50 %.2f ms, p99 %.2f ms, failures %lld)\n",
                threads, per_run / seconds, static_cast<long long>(per_run),
                latencies[per_run / 2], latencies[per_run * 99 / 100],
                static_cast<long long>(failures.load()));
    ++run;
  }
  std::printf("process RSS at end: VmRSS %s, VmHWM %s\n", ProcStatus("VmRSS").c_str(),
              ProcStatus("VmHWM").c_str());
  return 0;
}

}  // namespace
}  // namespace weightpath::store

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return weightpath::store::Run();
}
