// Every metric the server exports, defined in one place. Families are built
// once and children looked up, never added, on the paths that run often; the
// two resolve metrics are per-thread shards summed at scrape time
// (server/resolve_stats.h).
#pragma once

#include "absl/strings/string_view.h"
#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/security/device_call_limits.h"
#include "server/observability/resolve_stats.h"
#include "server/resolve/resolver.h"
#include "store/device_drift.h"
#include "store/store.h"
#include "store/write_behind.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

// The standard process_* metrics (CPU seconds, resident and virtual memory,
// open and maximum fds, start time), read from /proc/self at scrape time:
// prometheus-cpp has no process collector.
class ProcessStats final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

// The device RPCs, as weightpath_device_calls_shed_total labels them.
enum class DeviceCallMethod { kResolve, kReportMeasurement, kReportOutcome };

// Version strings come from devices (agent_version) or from any policy an
// operator loaded, so as label values they are bounded: the
// kVersionLabelsKept most common plausible values (at most
// kVersionLabelMaxBytes of letters, digits and . _ + : ~ -, starting with a
// letter or digit), `keep` whatever its count, kUnknownVersionLabel for ""
// (a device that sent none, or not re-resolved since the store's upgrade),
// and kOtherVersionLabel for the rest summed (always present, 0 when
// nothing is folded). At most kVersionLabelsKept + 3 series per gauge.
inline constexpr size_t kVersionLabelsKept = 20;
inline constexpr size_t kVersionLabelMaxBytes = 64;
inline constexpr char kOtherVersionLabel[] = "other";
inline constexpr char kUnknownVersionLabel[] = "unknown";
std::map<std::string, uint64_t> BoundVersionLabels(const std::map<std::string, uint64_t>& counts,
                                                   absl::string_view keep);

enum class GrpcConnectionRefusal {
  kDescriptorReserve,
  kMaxConnections,
  kAcceptFailed,
  kSilentOverCap,
  kSilentPastDeadline,
};

class ServerMetrics {
 public:
  explicit ServerMetrics(std::shared_ptr<prometheus::Registry> registry);
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // The resolve counters and latency (server/resolve_stats.h); whatever
  // exposes registry() must expose this too.
  const std::shared_ptr<ResolveStats>& resolve_stats() const { return resolve_stats_; }
  // Likewise, the process_* metrics.
  const std::shared_ptr<ProcessStats>& process_stats() const { return process_stats_; }

  // `code` is an absl/gRPC status code number (they share the numbering).
  void RecordResolve(const ResolveSummary& summary, int code, double seconds);
  void RecordReload(bool succeeded);
  // Replaces the single weightpath_policy_info series.
  void SetPolicyInfo(absl::string_view policy_version, absl::string_view catalog_version);

  // Whether the catalog in force was verified (weightpath_catalog_signed
  // 1/0) and, for a signed one, when its metadata expires first.
  void SetCatalogTrust(const CatalogTrust& trust);
  // A timestamp.json the server signed with --timestamp_key, or a round
  // that failed (server/timestamp_signer.h).
  void RecordTimestampSigned(bool succeeded);
  // A renewal of the TLS files served (true), or a change to them that was
  // refused, the set in use serving on (server/security/tls_reloader.h).
  void RecordTlsReload(bool taken);
  // Whether the TLS files as last read are refused, so what is served is
  // not what the operator last wrote.
  void SetTlsFilesRefused(bool refused);

  // Fleet registry and verification evidence (see server/fleet_state.h).
  using ClassAndPath = std::pair<std::string, std::string>;
  void RecordMeasurement(absl::string_view hardware_class, absl::string_view path,
                         bool regression, bool judged);
  void RecordFleetRecordDropped();
  // The queue keeps running totals; the counters advance by what is new.
  void SetWriteBehind(const store::WriteBehindCounters& counters);
  // Records waiting in the write-behind queue.
  void SetWriteBehindPending(size_t records);
  void SetStoreUp(bool up);
  // A connection to the gRPC port closed as soon as it was accepted, because
  // it took a descriptor of the reserve, or an accept() that failed
  // (server/grpc_listener.h): weightpath_grpc_connections_refused_total.
  void RecordGrpcConnectionRefused(GrpcConnectionRefusal reason);
  // Whether the last checks proved the gRPC port accepts connections
  // (server/listener_watchdog.h): weightpath_grpc_listener_up 1/0.
  void SetGrpcListenerUp(bool up);
  // Replace the whole gauge: a pair missing from `counts` reads 0.
  void SetDevicesSeen(const std::map<ClassAndPath, uint64_t>& counts);
  void SetPathVerified(const std::map<ClassAndPath, bool>& verified);
  // weightpath_devices_drifted and _persistent, keyed (hardware class,
  // reason) as store::RunningCounts::drifted; a pair not in `drifted` reads 0.
  void SetDevicesDrifted(
      const std::map<std::pair<std::string, std::string>, store::DriftCount>& drifted);
  // weightpath_devices_by_policy_version and _by_agent_version: the devices
  // in the devices-seen window by the versions their last resolve carried,
  // each through BoundVersionLabels (`policy_in_force` is always its own
  // series). A value no longer among them loses its series.
  void SetDevicesByVersion(const std::map<std::string, uint64_t>& by_policy_version,
                           const std::map<std::string, uint64_t>& by_agent_version,
                           absl::string_view policy_in_force);
  // An audited FleetAdmin call whose record the store refused
  // (weightpath_audit_write_failures_total).
  void RecordAuditWriteFailed();
  // Audit events deleted by retention (weightpath_audit_events_pruned_total).
  void RecordAuditEventsPruned(uint64_t count);
  // A refused FleetAdmin call not written to the audit trail because its
  // caller was past their budget of refusals
  // (weightpath_audit_refusals_not_recorded_total).
  void RecordAuditRefusalNotRecorded();

  // A FleetAdmin call or a ReportMeasurement / ReportOutcome call answered
  // with `code` (weightpath_rpc_requests_total; every pair at 0 from the
  // start). `method` is the label value, "FleetAdmin/ListDevices"; one no
  // service has is not counted, so nothing from outside adds a series.
  // Counted where those calls finish (api/store_call.h), not by a gRPC
  // interceptor: with any interceptor registered, gRPC builds its
  // interception state for every call, ResolveWeightPath and health
  // included (about 450 instructions a resolve).
  void RecordRpc(absl::string_view method, int code);

  // A device call refused by an overload guard (server/device_call_limits.h).
  void RecordShed(DeviceCallMethod method, ShedReason reason);

  // A recorded outcome report (a retried key excluded): an OUTCOME_BOOT_OK
  // or OUTCOME_BOOT_FAILED by where the booted decision came from
  // (weightpath_agent_boots_total), and any report attributed to no rollout
  // (weightpath_outcomes_outside_rollouts_total), which the rollout
  // counters never see. Both take validated enum values.
  void RecordOutcome(v1::Outcome outcome, v1::BootSource boot_source, bool in_rollout);
  // An OUTCOME_CACHE_FULL report (a retried key excluded) from a device of
  // `hardware_class` (weightpath_cache_full_outcomes_total): a build that
  // does not fit that class's disks, which no rollout gate counts as the
  // build failing. One series per class, precreated.
  void RecordCacheFull(policy::HardwareClass hardware_class);
  // The bytes an outcome report (a retried key excluded) says its device
  // downloaded, by source (weightpath_device_download_bytes_total{source=
  // "mirror"|"origin"}): what the site caches saved the origin, fleet-wide.
  // Validated (at most kMaxReportedDownloadBytes each) before.
  void RecordDeviceDownload(uint64_t from_mirrors, uint64_t from_origin);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  // Not in the registry: the exposer collects it next to it.
  std::shared_ptr<ResolveStats> resolve_stats_;
  std::shared_ptr<ProcessStats> process_stats_;
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Counter& reloads_succeeded_;
  prometheus::Counter& reloads_failed_;
  prometheus::Family<prometheus::Gauge>& policy_info_;
  prometheus::Gauge& catalog_signed_;
  prometheus::Family<prometheus::Gauge>& catalog_expires_;
  prometheus::Family<prometheus::Gauge>& catalog_uncovered_routes_;
  prometheus::Counter* timestamps_signed_ = nullptr;
  prometheus::Counter* timestamps_failed_ = nullptr;
  prometheus::Counter* tls_reloads_taken_ = nullptr;
  prometheus::Counter* tls_reloads_refused_ = nullptr;
  prometheus::Gauge* tls_files_refused_ = nullptr;
  prometheus::Gauge* grpc_listener_up_ = nullptr;
  // By GrpcConnectionRefusal.
  std::array<prometheus::Counter*, 5> grpc_refused_ = {};

  prometheus::Family<prometheus::Counter>& measurements_;
  prometheus::Family<prometheus::Counter>& measurement_regressions_;
  prometheus::Family<prometheus::Counter>& measurements_not_judged_;
  prometheus::Counter& fleet_records_dropped_;
  prometheus::Counter& fleet_records_flushed_;
  prometheus::Counter& fleet_flush_failed_batches_;
  prometheus::Counter& fleet_flush_failed_records_;
  prometheus::Counter& fleet_flush_requeued_records_;
  prometheus::Gauge& fleet_queue_pending_;
  prometheus::Gauge& store_up_;
  prometheus::Family<prometheus::Gauge>& devices_seen_;
  prometheus::Family<prometheus::Gauge>& path_verified_;
  // [method][0: device rate, 1: in flight], all made at start.
  prometheus::Counter* shed_[3][2] = {};
  // Every series made at start, so increase() sees the first report.
  // [boot source][0: boot_ok, 1: boot_failed]
  std::array<std::array<prometheus::Counter*, 2>, v1::BootSource_ARRAYSIZE> boots_ = {};
  std::array<prometheus::Counter*, v1::Outcome_ARRAYSIZE> outcomes_outside_rollouts_ = {};
  std::array<prometheus::Counter*, policy::kAllHardwareClasses.size()> cache_full_ = {};
  // [hardware class][drift reason], all made at start.
  std::array<std::array<prometheus::Gauge*, store::kDriftReasons.size()>,
             policy::kAllHardwareClasses.size()>
      devices_drifted_ = {};
  std::array<std::array<prometheus::Gauge*, store::kDriftReasons.size()>,
             policy::kAllHardwareClasses.size()>
      devices_drifted_persistent_ = {};
  prometheus::Counter* downloaded_from_mirrors_ = nullptr;
  prometheus::Counter* downloaded_from_origin_ = nullptr;
  // gRPC's status codes, OK (0) to UNAUTHENTICATED (16).
  static constexpr int kStatusCodes = 17;
  // By label value ("FleetAdmin/ListDevices"); filled once, then only read.
  absl::flat_hash_map<std::string, std::array<prometheus::Counter*, kStatusCodes>> rpc_requests_;

  absl::Mutex fleet_mutex_;
  store::WriteBehindCounters last_write_behind_ ABSL_GUARDED_BY(fleet_mutex_);
  std::map<ClassAndPath, prometheus::Gauge*> devices_seen_series_ ABSL_GUARDED_BY(fleet_mutex_);
  std::map<ClassAndPath, prometheus::Gauge*> path_verified_series_ ABSL_GUARDED_BY(fleet_mutex_);
  prometheus::Family<prometheus::Gauge>& devices_by_policy_version_;
  prometheus::Family<prometheus::Gauge>& devices_by_agent_version_;
  std::map<std::string, prometheus::Gauge*> devices_by_policy_version_series_
      ABSL_GUARDED_BY(fleet_mutex_);
  std::map<std::string, prometheus::Gauge*> devices_by_agent_version_series_
      ABSL_GUARDED_BY(fleet_mutex_);
  prometheus::Counter& audit_write_failures_;
  prometheus::Counter& audit_events_pruned_;
  prometheus::Counter& audit_refusals_not_recorded_;

  absl::Mutex policy_info_mutex_;
  prometheus::Gauge* policy_info_series_ ABSL_GUARDED_BY(policy_info_mutex_) = nullptr;
  prometheus::Gauge* catalog_expires_series_ ABSL_GUARDED_BY(policy_info_mutex_) = nullptr;
  std::vector<prometheus::Gauge*> catalog_uncovered_series_ ABSL_GUARDED_BY(policy_info_mutex_);
};

}  // namespace weightpath::server
