#include "server/observability/metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "policy/hardware_class.h"
#include "weightpath/v1/fleet_admin.grpc.pb.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace weightpath::server {
namespace {

// An enum value's name as a label: "BOOT_SOURCE_LAST_GOOD" -> "last_good".
std::string EnumLabel(absl::string_view name, absl::string_view prefix) {
  absl::ConsumePrefix(&name, prefix);
  return absl::AsciiStrToLower(name);
}

}  // namespace

ServerMetrics::ServerMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      resolve_stats_(std::make_shared<ResolveStats>()),
      process_stats_(std::make_shared<ProcessStats>()),
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
      catalog_uncovered_routes_(
          prometheus::BuildGauge()
              .Name("weightpath_catalog_uncovered_routes")
              .Help("Signed catalog only: 1 for each model, weight path and hardware class the "
                    "policy routes to a signed target whose hardware_classes omit that class "
                    "(devices of the class refuse every such decision); no series when none")
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
      measurements_not_judged_(prometheus::BuildCounter()
                                   .Name("weightpath_measurements_not_judged_total")
                                   .Help("Recorded measurements the policy has no expected "
                                         "figure for (another CPU model or thread count), so "
                                         "no regression verdict was possible")
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
      fleet_flush_requeued_records_(
          prometheus::BuildCounter()
              .Name("weightpath_fleet_flush_requeued_records_total")
              .Help("Device records of batches the store refused as unavailable, queued again "
                    "for the next flush (once per refusal)")
              .Register(*registry_)
              .Add({})),
      fleet_queue_pending_(prometheus::BuildGauge()
                               .Name("weightpath_fleet_queue_pending_records")
                               .Help("Device records waiting in the write-behind queue at the "
                                     "last fleet refresh (--fleet_refresh_interval)")
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
                         .Register(*registry_)),
      devices_by_policy_version_(
          prometheus::BuildGauge()
              .Name("weightpath_devices_by_policy_version")
              .Help("Devices whose last resolve is within --devices_seen_window, by the policy "
                    "version it was decided with (the 20 most common, the one in force, "
                    "\"unknown\" and \"other\"), read from the store")
              .Register(*registry_)),
      devices_by_agent_version_(
          prometheus::BuildGauge()
              .Name("weightpath_devices_by_agent_version")
              .Help("Devices whose last resolve is within --devices_seen_window, by the agent "
                    "version they sent (the 20 most common plausible ones, \"unknown\" and "
                    "\"other\"), read from the store")
              .Register(*registry_)),
      audit_write_failures_(prometheus::BuildCounter()
                                .Name("weightpath_audit_write_failures_total")
                                .Help("Audited FleetAdmin calls whose audit record the store "
                                      "refused; each is logged whole at error level")
                                .Register(*registry_)
                                .Add({})),
      audit_events_pruned_(prometheus::BuildCounter()
                               .Name("weightpath_audit_events_pruned_total")
                               .Help("Audit events deleted by retention (--audit_retention, "
                                     "--audit_max_events)")
                               .Register(*registry_)
                               .Add({})),
      audit_refusals_not_recorded_(
          prometheus::BuildCounter()
              .Name("weightpath_audit_refusals_not_recorded_total")
              .Help("Refused FleetAdmin calls left out of the audit trail because their caller "
                    "was past the budget of refused calls recorded per identity; the next "
                    "recorded refusal says how many were left out")
              .Register(*registry_)
              .Add({})) {
  prometheus::Family<prometheus::Counter>& timestamps =
      prometheus::BuildCounter()
          .Name("weightpath_timestamp_signatures_total")
          .Help("timestamp.json versions the server signed with --timestamp_key (success), and "
                "rounds that failed (error)")
          .Register(*registry_);
  timestamps_signed_ = &timestamps.Add({{"result", "success"}});
  timestamps_failed_ = &timestamps.Add({{"result", "error"}});
  prometheus::Family<prometheus::Counter>& tls_reloads =
      prometheus::BuildCounter()
          .Name("weightpath_tls_reloads_total")
          .Help("Changes to the TLS files by result: success, a renewed set served; error, a "
                "set refused (empty, not a regular file, not PEM, key not matching), the last "
                "good set serving on")
          .Register(*registry_);
  tls_reloads_taken_ = &tls_reloads.Add({{"result", "success"}});
  tls_reloads_refused_ = &tls_reloads.Add({{"result", "error"}});
  tls_files_refused_ = &prometheus::BuildGauge()
                            .Name("weightpath_tls_files_refused")
                            .Help("1 while the TLS files as last read are refused and an older "
                                  "set is served, else 0")
                            .Register(*registry_)
                            .Add({});
  // 1 from the start: the port was bound and accepting when the server
  // reported SERVING; the listener watchdog sets it from then on.
  grpc_listener_up_ = &prometheus::BuildGauge()
                           .Name("weightpath_grpc_listener_up")
                           .Help("1 while the gRPC port is proved to accept connections "
                                 "(--listener_check_interval); 0 once it answered none of 3 "
                                 "checks in a row, just before the server exits to be restarted")
                           .Register(*registry_)
                           .Add({});
  grpc_listener_up_->Set(1);
  prometheus::Family<prometheus::Counter>& grpc_refused =
      prometheus::BuildCounter()
          .Name("weightpath_grpc_connections_refused_total")
          .Help("Connections to the gRPC port the server closed before gRPC saw them: past "
                "--max_connections (max_connections) or into the descriptors it keeps for "
                "itself (descriptor_reserve); the oldest of the silent ones when too many were "
                "silent (silent_over_cap) or one silent past --handshake_timeout "
                "(silent_past_deadline); and accept() calls that failed, retried after 50 ms "
                "(accept_failed)")
          .Register(*registry_);
  grpc_refused_[static_cast<int>(GrpcConnectionRefusal::kDescriptorReserve)] =
      &grpc_refused.Add({{"reason", "descriptor_reserve"}});
  grpc_refused_[static_cast<int>(GrpcConnectionRefusal::kMaxConnections)] =
      &grpc_refused.Add({{"reason", "max_connections"}});
  grpc_refused_[static_cast<int>(GrpcConnectionRefusal::kAcceptFailed)] =
      &grpc_refused.Add({{"reason", "accept_failed"}});
  grpc_refused_[static_cast<int>(GrpcConnectionRefusal::kSilentOverCap)] =
      &grpc_refused.Add({{"reason", "silent_over_cap"}});
  grpc_refused_[static_cast<int>(GrpcConnectionRefusal::kSilentPastDeadline)] =
      &grpc_refused.Add({{"reason", "silent_past_deadline"}});
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
  prometheus::Family<prometheus::Counter>& boots =
      prometheus::BuildCounter()
          .Name("weightpath_agent_boots_total")
          .Help("Boots agents reported (ReportOutcome OUTCOME_BOOT_OK / OUTCOME_BOOT_FAILED) by "
                "where the booted decision came from: server (resolved at this boot), last_good "
                "(the server was unreachable: the saved decision), offline (the device's default "
                "policy), unspecified (an agent that predates boot_source)")
          .Register(*registry_);
  for (int source = 0; source < v1::BootSource_ARRAYSIZE; ++source) {
    if (!v1::BootSource_IsValid(source)) continue;
    const std::string source_label =
        EnumLabel(v1::BootSource_Name(static_cast<v1::BootSource>(source)), "BOOT_SOURCE_");
    boots_[source][0] = &boots.Add({{"source", source_label}, {"outcome", "boot_ok"}});
    boots_[source][1] = &boots.Add({{"source", source_label}, {"outcome", "boot_failed"}});
  }
  prometheus::Family<prometheus::Counter>& outside_rollouts =
      prometheus::BuildCounter()
          .Name("weightpath_outcomes_outside_rollouts_total")
          .Help("Outcome reports attributed to no rollout (no rollout_id), by outcome: e.g. "
                "artifact_verification_failed is a download or verification failure of the "
                "build a device was given outside any rollout")
          .Register(*registry_);
  for (int outcome = 0; outcome < v1::Outcome_ARRAYSIZE; ++outcome) {
    if (!v1::Outcome_IsValid(outcome) || outcome == v1::OUTCOME_UNSPECIFIED) continue;
    outcomes_outside_rollouts_[outcome] = &outside_rollouts.Add(
        {{"outcome", EnumLabel(v1::Outcome_Name(static_cast<v1::Outcome>(outcome)), "OUTCOME_")}});
  }
  prometheus::Family<prometheus::Counter>& cache_full =
      prometheus::BuildCounter()
          .Name("weightpath_cache_full_outcomes_total")
          .Help("OUTCOME_CACHE_FULL reports by the reporting device's hardware class: a build "
                "refused before download because it does not fit the device's cache "
                "(cache_max_bytes, cache_min_free_bytes) even after eviction; the device keeps "
                "its last good build")
          .Register(*registry_);
  for (size_t i = 0; i < policy::kAllHardwareClasses.size(); ++i) {
    cache_full_[i] = &cache_full.Add(
        {{"hardware_class", std::string(policy::HardwareClassName(policy::kAllHardwareClasses[i]))}});
  }
  prometheus::Family<prometheus::Gauge>& drifted =
      prometheus::BuildGauge()
          .Name("weightpath_devices_drifted")
          .Help("Devices in the devices-seen window whose last report says they run another "
                "build than their assignment (weightpathctl devices --drift), by hardware class "
                "and reason: pending (not applied yet), rolled_back, build_refused, cache_full, "
                "not_running, fallback (booted from last good or offline)")
          .Register(*registry_);
  prometheus::Family<prometheus::Gauge>& drifted_persistent =
      prometheus::BuildGauge()
          .Name("weightpath_devices_drifted_persistent")
          .Help("Of weightpath_devices_drifted, the devices drifting for longer than "
                "--drift_persistent_after")
          .Register(*registry_);
  for (size_t c = 0; c < policy::kAllHardwareClasses.size(); ++c) {
    for (size_t r = 0; r < store::kDriftReasons.size(); ++r) {
      const prometheus::Labels labels = {
          {"hardware_class", std::string(policy::HardwareClassName(policy::kAllHardwareClasses[c]))},
          {"reason", std::string(store::kDriftReasons[r])}};
      devices_drifted_[c][r] = &drifted.Add(labels);
      devices_drifted_persistent_[c][r] = &drifted_persistent.Add(labels);
    }
  }
  prometheus::Family<prometheus::Counter>& device_downloads =
      prometheus::BuildCounter()
          .Name("weightpath_device_download_bytes_total")
          .Help("Bytes devices downloaded to stage their builds, as their outcome reports say, "
                "by source: mirror (a configured artifact_mirrors entry, such as a site cache) "
                "or origin (the catalog's URI); mirror / (mirror + origin) is what the site "
                "caches saved the origin")
          .Register(*registry_);
  downloaded_from_mirrors_ = &device_downloads.Add({{"source", "mirror"}});
  downloaded_from_origin_ = &device_downloads.Add({{"source", "origin"}});
  prometheus::Family<prometheus::Counter>& rpc_requests =
      prometheus::BuildCounter()
          .Name("weightpath_rpc_requests_total")
          .Help("FleetAdmin calls and ReportMeasurement / ReportOutcome calls by method "
                "(Service/Method) and gRPC status code; ResolveWeightPath is "
                "weightpath_resolve_requests_total")
          .Register(*registry_);
  std::vector<std::pair<const google::protobuf::ServiceDescriptor*, std::string>> rpc_methods;
  const google::protobuf::DescriptorPool* pool = google::protobuf::DescriptorPool::generated_pool();
  // fleet_admin.proto holds only the service, so its descriptor is in the
  // pool only where something keeps its object in the link: in the server,
  // the reflection service does (api/reflection_v1.cc). A test binary
  // without it has no FleetAdmin series, and serves no FleetAdmin call.
  if (const google::protobuf::ServiceDescriptor* admin =
          pool->FindServiceByName(v1::FleetAdmin::service_full_name())) {
    for (int i = 0; i < admin->method_count(); ++i) {
      rpc_methods.emplace_back(admin, admin->method(i)->name());
    }
  }
  const google::protobuf::ServiceDescriptor* device =
      pool->FindServiceByName(v1::WeightPath::service_full_name());
  rpc_methods.emplace_back(device, "ReportMeasurement");
  rpc_methods.emplace_back(device, "ReportOutcome");
  for (const auto& [service, method] : rpc_methods) {
    const std::string label = absl::StrCat(service->name(), "/", method);
    std::array<prometheus::Counter*, kStatusCodes>& by_code = rpc_requests_[label];
    for (int code = 0; code < kStatusCodes; ++code) {
      by_code[code] = &rpc_requests.Add(
          {{"method", label},
           {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))}});
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
  for (prometheus::Gauge* series : catalog_uncovered_series_) {
    catalog_uncovered_routes_.Remove(series);
  }
  catalog_uncovered_series_.clear();
  for (const UncoveredRoute& route : trust.uncovered_routes) {
    prometheus::Gauge& series = catalog_uncovered_routes_.Add({{"model", route.model},
                                                               {"weight_path", route.weight_path},
                                                               {"hardware_class", route.hardware_class}});
    series.Set(1);
    catalog_uncovered_series_.push_back(&series);
  }
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

void ServerMetrics::RecordTlsReload(bool taken) {
  (taken ? tls_reloads_taken_ : tls_reloads_refused_)->Increment();
}

void ServerMetrics::SetTlsFilesRefused(bool refused) { tls_files_refused_->Set(refused ? 1 : 0); }

void ServerMetrics::RecordMeasurement(absl::string_view hardware_class, absl::string_view path,
                                      bool regression, bool judged) {
  const prometheus::Labels labels = {{"hardware_class", std::string(hardware_class)},
                                     {"path", std::string(path)}};
  measurements_.Add(labels).Increment();
  if (regression) measurement_regressions_.Add(labels).Increment();
  if (!judged) measurements_not_judged_.Add(labels).Increment();
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
  fleet_flush_requeued_records_.Increment(
      static_cast<double>(counters.requeued - last_write_behind_.requeued));
  last_write_behind_ = counters;
}

void ServerMetrics::SetWriteBehindPending(size_t records) {
  fleet_queue_pending_.Set(static_cast<double>(records));
}

void ServerMetrics::SetStoreUp(bool up) { store_up_.Set(up ? 1 : 0); }

void ServerMetrics::SetGrpcListenerUp(bool up) { grpc_listener_up_->Set(up ? 1 : 0); }

void ServerMetrics::RecordGrpcConnectionRefused(GrpcConnectionRefusal reason) {
  grpc_refused_[static_cast<int>(reason)]->Increment();
}

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

void ServerMetrics::SetDevicesDrifted(
    const std::map<std::pair<std::string, std::string>, store::DriftCount>& drifted) {
  std::array<std::array<store::DriftCount, store::kDriftReasons.size()>,
             policy::kAllHardwareClasses.size()>
      counts = {};
  for (const auto& [key, count] : drifted) {
    // Only the classes and reasons the series were made for: anything else
    // in the store (a class a later version knows) is not a label here.
    for (size_t c = 0; c < policy::kAllHardwareClasses.size(); ++c) {
      if (policy::HardwareClassName(policy::kAllHardwareClasses[c]) != key.first) continue;
      for (size_t r = 0; r < store::kDriftReasons.size(); ++r) {
        if (store::kDriftReasons[r] != key.second) continue;
        counts[c][r].devices += count.devices;
        counts[c][r].persistent += count.persistent;
      }
    }
  }
  for (size_t c = 0; c < counts.size(); ++c) {
    for (size_t r = 0; r < counts[c].size(); ++r) {
      devices_drifted_[c][r]->Set(static_cast<double>(counts[c][r].devices));
      devices_drifted_persistent_[c][r]->Set(static_cast<double>(counts[c][r].persistent));
    }
  }
}

void ServerMetrics::SetPathVerified(const std::map<ClassAndPath, bool>& verified) {
  absl::MutexLock lock(&fleet_mutex_);
  // Every class and path the policy or the fleet knows gets its measurement
  // counters at 0, so increase() sees the first measurement and regression.
  for (const auto& [key, unused] : verified) {
    const prometheus::Labels labels = {{"hardware_class", key.first}, {"path", key.second}};
    measurements_.Add(labels);
    measurement_regressions_.Add(labels);
    measurements_not_judged_.Add(labels);
  }
  ReplaceGaugeSeries(verified, path_verified_, path_verified_series_);
}

namespace {

bool PlausibleVersion(absl::string_view value) {
  if (value.empty() || value.size() > kVersionLabelMaxBytes) return false;
  if (!absl::ascii_isalnum(static_cast<unsigned char>(value[0]))) return false;
  for (char c : value) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("._+:~-").find(c) == absl::string_view::npos) {
      return false;
    }
  }
  // The two names of the folded series are not a device's to take.
  return value != kOtherVersionLabel && value != kUnknownVersionLabel;
}

// Sets the series of `values` and removes the ones no longer among them, so
// however the hostile values change the family holds only what was set last.
void ReplaceVersionSeries(const std::map<std::string, uint64_t>& values, absl::string_view label,
                          prometheus::Family<prometheus::Gauge>& family,
                          std::map<std::string, prometheus::Gauge*>& series) {
  for (auto it = series.begin(); it != series.end();) {
    if (values.count(it->first) == 0) {
      family.Remove(it->second);
      it = series.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [value, count] : values) {
    prometheus::Gauge*& gauge = series[value];
    if (gauge == nullptr) gauge = &family.Add({{std::string(label), value}});
    gauge->Set(static_cast<double>(count));
  }
}

}  // namespace

std::map<std::string, uint64_t> BoundVersionLabels(const std::map<std::string, uint64_t>& counts,
                                                   absl::string_view keep) {
  std::map<std::string, uint64_t> bounded = {{kOtherVersionLabel, 0}};
  // The version to keep has its series even at 0 devices (a policy just
  // loaded), so a query comparing against it has something to compare.
  if (PlausibleVersion(keep)) bounded[std::string(keep)] = 0;
  std::vector<std::pair<std::string, uint64_t>> plausible;
  for (const auto& [value, count] : counts) {
    if (value.empty()) {
      bounded[kUnknownVersionLabel] += count;
    } else if (value == keep && PlausibleVersion(value)) {
      bounded[value] = count;
    } else if (PlausibleVersion(value)) {
      plausible.emplace_back(value, count);
    } else {
      bounded[kOtherVersionLabel] += count;
    }
  }
  // Most devices first; a tie in name order, so the cut is the same on every
  // replica reading the same store.
  std::sort(plausible.begin(), plausible.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  for (size_t i = 0; i < plausible.size(); ++i) {
    if (i < kVersionLabelsKept) {
      bounded[plausible[i].first] = plausible[i].second;
    } else {
      bounded[kOtherVersionLabel] += plausible[i].second;
    }
  }
  return bounded;
}

void ServerMetrics::SetDevicesByVersion(const std::map<std::string, uint64_t>& by_policy_version,
                                        const std::map<std::string, uint64_t>& by_agent_version,
                                        absl::string_view policy_in_force) {
  const std::map<std::string, uint64_t> policies =
      BoundVersionLabels(by_policy_version, policy_in_force);
  const std::map<std::string, uint64_t> agents = BoundVersionLabels(by_agent_version, "");
  absl::MutexLock lock(&fleet_mutex_);
  ReplaceVersionSeries(policies, "policy_version", devices_by_policy_version_,
                       devices_by_policy_version_series_);
  ReplaceVersionSeries(agents, "agent_version", devices_by_agent_version_,
                       devices_by_agent_version_series_);
}

void ServerMetrics::RecordAuditWriteFailed() { audit_write_failures_.Increment(); }

void ServerMetrics::RecordAuditEventsPruned(uint64_t count) {
  audit_events_pruned_.Increment(static_cast<double>(count));
}

void ServerMetrics::RecordAuditRefusalNotRecorded() { audit_refusals_not_recorded_.Increment(); }

void ServerMetrics::RecordRpc(absl::string_view method, int code) {
  const auto found = rpc_requests_.find(method);
  if (found != rpc_requests_.end() && code >= 0 && code < kStatusCodes) {
    found->second[code]->Increment();
  }
}

void ServerMetrics::RecordShed(DeviceCallMethod method, ShedReason reason) {
  if (reason == ShedReason::kNone) return;
  shed_[static_cast<int>(method)][reason == ShedReason::kDeviceRate ? 0 : 1]->Increment();
}

void ServerMetrics::RecordDeviceDownload(uint64_t from_mirrors, uint64_t from_origin) {
  downloaded_from_mirrors_->Increment(static_cast<double>(from_mirrors));
  downloaded_from_origin_->Increment(static_cast<double>(from_origin));
}

void ServerMetrics::RecordCacheFull(policy::HardwareClass hardware_class) {
  for (size_t i = 0; i < policy::kAllHardwareClasses.size(); ++i) {
    if (policy::kAllHardwareClasses[i] == hardware_class) cache_full_[i]->Increment();
  }
}

void ServerMetrics::RecordOutcome(v1::Outcome outcome, v1::BootSource boot_source,
                                  bool in_rollout) {
  if (!v1::Outcome_IsValid(outcome) || !v1::BootSource_IsValid(boot_source)) return;
  if (outcome == v1::OUTCOME_BOOT_OK || outcome == v1::OUTCOME_BOOT_FAILED) {
    boots_[boot_source][outcome == v1::OUTCOME_BOOT_OK ? 0 : 1]->Increment();
  }
  if (!in_rollout && outcomes_outside_rollouts_[outcome] != nullptr) {
    outcomes_outside_rollouts_[outcome]->Increment();
  }
}

namespace {

prometheus::MetricFamily OneSample(const std::string& name, const std::string& help,
                                   prometheus::MetricType type, double value) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(metric);
  return family;
}

// Fields of /proc/self/stat from the third (state) on: the second, the
// command name in parentheses, may itself hold spaces and parentheses.
std::vector<std::string> StatFields() {
  std::ifstream file("/proc/self/stat");
  const std::string line((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t name_end = line.rfind(')');
  if (name_end == std::string::npos) return {};
  std::istringstream rest(line.substr(name_end + 1));
  return {std::istream_iterator<std::string>(rest), std::istream_iterator<std::string>()};
}

// The kernel's boot time (Unix seconds), from /proc/stat's btime line.
double BootTimeSeconds() {
  std::ifstream file("/proc/stat");
  std::string key;
  double value = 0;
  while (file >> key) {
    if (key == "btime" && file >> value) return value;
    file.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

int OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;  // the descriptor opendir itself holds
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessStats::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  const std::vector<std::string> stat = StatFields();
  // Indexes into StatFields(): proc(5) field numbers minus 3.
  constexpr size_t kUserTicks = 11, kSystemTicks = 12, kStartTicks = 19, kVirtualBytes = 20,
                   kResidentPages = 21;
  if (stat.size() > kResidentPages) {
    const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
    const auto number = [&](size_t index) { return std::strtod(stat[index].c_str(), nullptr); };
    families.push_back(OneSample("process_cpu_seconds_total",
                                 "Total user and system CPU time spent in seconds.",
                                 MetricType::Counter,
                                 (number(kUserTicks) + number(kSystemTicks)) / ticks_per_second));
    families.push_back(OneSample("process_resident_memory_bytes", "Resident memory size in bytes.",
                                 MetricType::Gauge,
                                 number(kResidentPages) * static_cast<double>(sysconf(_SC_PAGESIZE))));
    families.push_back(OneSample("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                                 MetricType::Gauge, number(kVirtualBytes)));
    families.push_back(OneSample(
        "process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
        MetricType::Gauge, BootTimeSeconds() + number(kStartTicks) / ticks_per_second));
  }
  const int open_fds = OpenFds();
  if (open_fds >= 0) {
    families.push_back(OneSample("process_open_fds", "Number of open file descriptors.",
                                 MetricType::Gauge, open_fds));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    families.push_back(OneSample("process_max_fds", "Maximum number of open file descriptors.",
                                 MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return families;
}

}  // namespace weightpath::server
