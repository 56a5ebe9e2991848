#include "server/metrics.h"

#include <utility>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "policy/hardware_class.h"

namespace weightpath::server {
ServerMetrics::ServerMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      resolve_stats_(std::make_shared<ResolveStats>()),
      reloads_(prometheus::BuildCounter()
                   .Name("weightpath_policy_reloads_total")
                   .Help("Policy and catalog reloads by result; an error keeps the last "
                         "good pair serving")
                   .Register(*registry_)),
      reloads_succeeded_(reloads_.Add({{"result", "success"}})),
      reloads_failed_(reloads_.Add({{"result", "error"}})),
      policy_info_(prometheus::BuildGauge()
                       .Name("weightpath_policy_info")
                       .Help("Always 1; labelled with the policy and catalog versions in force")
                       .Register(*registry_)),
      catalog_signed_(prometheus::BuildGauge()
                          .Name("weightpath_catalog_signed")
                          .Help("1 when the catalog in force comes from TUF targets metadata the "
                                "server verified against its trusted root (--catalog DIR with "
                                "--catalog_root), 0 for a plain YAML catalog (unsigned)")
                          .Register(*registry_)
                          .Add({})),
      catalog_expires_(prometheus::BuildGauge()
                           .Name("weightpath_catalog_metadata_expires_timestamp_seconds")
                           .Help("Signed catalog only: when the first of its verified root, "
                                 "timestamp, snapshot and targets expires (Unix seconds); "
                                 "devices refuse new artifacts from then on")
                           .Register(*registry_)),
      measurements_(prometheus::BuildCounter()
                        .Name("weightpath_measurements_total")
                        .Help("Measurements recorded (retries of a known key excluded), by the "
                              "device's hardware class and the path measured")
                        .Register(*registry_)),
      measurement_regressions_(prometheus::BuildCounter()
                                   .Name("weightpath_measurement_regressions_total")
                                   .Help("Recorded measurements below the configured fraction "
                                         "of the policy's expectation for the same CPU")
                                   .Register(*registry_)),
      fleet_records_dropped_(prometheus::BuildCounter()
                                 .Name("weightpath_fleet_records_dropped_total")
                                 .Help("Device records dropped because the write-behind queue "
                                       "was full; resolving went on")
                                 .Register(*registry_)
                                 .Add({})),
      fleet_records_flushed_(prometheus::BuildCounter()
                                 .Name("weightpath_fleet_records_flushed_total")
                                 .Help("Device records the write-behind queue wrote to the store")
                                 .Register(*registry_)
                                 .Add({})),
      fleet_flush_failed_batches_(prometheus::BuildCounter()
                                      .Name("weightpath_fleet_flush_failed_batches_total")
                                      .Help("Write-behind batches the store refused")
                                      .Register(*registry_)
                                      .Add({})),
      fleet_flush_failed_records_(prometheus::BuildCounter()
                                      .Name("weightpath_fleet_flush_failed_records_total")
                                      .Help("Device records lost in refused write-behind batches")
                                      .Register(*registry_)
                                      .Add({})),
      store_up_(prometheus::BuildGauge()
                    .Name("weightpath_store_up")
                    .Help("1 while the fleet store answers, 0 while it cannot be reached")
                    .Register(*registry_)
                    .Add({})),
      devices_seen_(prometheus::BuildGauge()
                        .Name("weightpath_devices_seen")
                        .Help("Devices whose last resolve is within --devices_seen_window, by "
                              "hardware class and path, read from the store")
                        .Register(*registry_)),
      path_verified_(prometheus::BuildGauge()
                         .Name("weightpath_path_verified")
                         .Help("1 when the path is verified on the hardware class (by the "
                               "policy or fleet evidence for some CPU model), else 0")
                         .Register(*registry_)) {
  prometheus::Family<prometheus::Counter>& timestamps =
      prometheus::BuildCounter()
          .Name("weightpath_timestamp_signatures_total")
          .Help("timestamp.json versions the server signed with --timestamp_key (success), and "
                "rounds that failed (error)")
          .Register(*registry_);
  timestamps_signed_ = &timestamps.Add({{"result", "success"}});
  timestamps_failed_ = &timestamps.Add({{"result", "error"}});
  prometheus::Family<prometheus::Counter>& shed =
      prometheus::BuildCounter()
          .Name("weightpath_device_calls_shed_total")
          .Help("Device calls refused RESOURCE_EXHAUSTED by --device_rate_limit (limit "
                "\"device_rate\") or --max_inflight_device_calls (\"inflight\")")
          .Register(*registry_);
  const char* const methods[] = {"ResolveWeightPath", "ReportMeasurement", "ReportOutcome"};
  const char* const limits[] = {"device_rate", "inflight"};
  for (int method = 0; method < 3; ++method) {
    for (int limit = 0; limit < 2; ++limit) {
      shed_[method][limit] = &shed.Add({{"method", methods[method]}, {"limit", limits[limit]}});
    }
  }
  prometheus::BuildGauge()
      .Name("weightpath_build_info")
      .Help("Always 1; labelled with the server's version")
      .Register(*registry_)
      .Add({{"version", WEIGHTPATH_VERSION}})
      .Set(1);
}

void ServerMetrics::RecordResolve(const ResolveSummary& summary, int code, double seconds) {
  resolve_stats_->Record(summary, code, seconds);
}

void ServerMetrics::RecordReload(bool succeeded) {
  (succeeded ? reloads_succeeded_ : reloads_failed_).Increment();
}

void ServerMetrics::SetPolicyInfo(absl::string_view policy_version,
                                  absl::string_view catalog_version) {
  absl::MutexLock lock(&policy_info_mutex_);
  if (policy_info_series_ != nullptr) policy_info_.Remove(policy_info_series_);
  policy_info_series_ = &policy_info_.Add({{"version", std::string(policy_version)},
                                           {"catalog_version", std::string(catalog_version)}});
  policy_info_series_->Set(1);
}

void ServerMetrics::SetCatalogTrust(const CatalogTrust& trust) {
  catalog_signed_.Set(trust.signed_catalog ? 1 : 0);
  absl::MutexLock lock(&policy_info_mutex_);
  if (!trust.signed_catalog || trust.metadata_expires == absl::InfiniteFuture()) {
    if (catalog_expires_series_ != nullptr) catalog_expires_.Remove(catalog_expires_series_);
    catalog_expires_series_ = nullptr;
    return;
  }
  if (catalog_expires_series_ == nullptr) catalog_expires_series_ = &catalog_expires_.Add({});
  catalog_expires_series_->Set(static_cast<double>(absl::ToUnixSeconds(trust.metadata_expires)));
}

void ServerMetrics::RecordTimestampSigned(bool succeeded) {
  (succeeded ? timestamps_signed_ : timestamps_failed_)->Increment();
}

void ServerMetrics::RecordMeasurement(absl::string_view hardware_class, absl::string_view path,
                                      bool regression) {
  const prometheus::Labels labels = {{"hardware_class", std::string(hardware_class)},
                                     {"path", std::string(path)}};
  measurements_.Add(labels).Increment();
  if (regression) measurement_regressions_.Add(labels).Increment();
}

void ServerMetrics::RecordFleetRecordDropped() { fleet_records_dropped_.Increment(); }

void ServerMetrics::SetWriteBehind(const store::WriteBehindCounters& counters) {
  absl::MutexLock lock(&fleet_mutex_);
  fleet_records_flushed_.Increment(
      static_cast<double>(counters.flushed - last_write_behind_.flushed));
  fleet_flush_failed_batches_.Increment(
      static_cast<double>(counters.failed_batches - last_write_behind_.failed_batches));
  fleet_flush_failed_records_.Increment(
      static_cast<double>(counters.failed_records - last_write_behind_.failed_records));
  last_write_behind_ = counters;
}

void ServerMetrics::SetStoreUp(bool up) { store_up_.Set(up ? 1 : 0); }

namespace {

// Sets every series in `values`, zeroes the ones that vanished (a class and
// path nobody runs any more still answers 0 rather than a stale count).
template <typename Value>
void ReplaceGaugeSeries(const std::map<ServerMetrics::ClassAndPath, Value>& values,
                        prometheus::Family<prometheus::Gauge>& family,
                        std::map<ServerMetrics::ClassAndPath, prometheus::Gauge*>& series) {
  for (auto& [key, gauge] : series) {
    if (values.count(key) == 0) gauge->Set(0);
  }
  for (const auto& [key, value] : values) {
    prometheus::Gauge*& gauge = series[key];
    if (gauge == nullptr) {
      gauge = &family.Add({{"hardware_class", key.first}, {"path", key.second}});
    }
    gauge->Set(static_cast<double>(value));
  }
}

}  // namespace

void ServerMetrics::SetDevicesSeen(const std::map<ClassAndPath, uint64_t>& counts) {
  absl::MutexLock lock(&fleet_mutex_);
  ReplaceGaugeSeries(counts, devices_seen_, devices_seen_series_);
}

void ServerMetrics::SetPathVerified(const std::map<ClassAndPath, bool>& verified) {
  absl::MutexLock lock(&fleet_mutex_);
  ReplaceGaugeSeries(verified, path_verified_, path_verified_series_);
}

void ServerMetrics::RecordShed(DeviceCallMethod method, ShedReason reason) {
  if (reason == ShedReason::kNone) return;
  shed_[static_cast<int>(method)][reason == ShedReason::kDeviceRate ? 0 : 1]->Increment();
}

}  // namespace weightpath::server
