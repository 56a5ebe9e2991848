#include "server/fleet/fleet_state.h"

#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "common/thread_name.h"
#include "policy/cpu_model.h"
#include "server/fleet/device_record.h"
#include "spdlog/spdlog.h"
#include "store/policy_expectations.h"

namespace weightpath::server {

std::string EvidenceKey(std::string_view path, std::string_view hardware_class,
                        std::string_view cpu_model) {
  std::string key;
  key.reserve(path.size() + hardware_class.size() + cpu_model.size() + 2);
  key.append(path).push_back('\0');
  key.append(hardware_class).push_back('\0');
  key.append(policy::NormalizeCpuModel(cpu_model));
  return key;
}

FleetState::FleetState(std::unique_ptr<store::FleetStore> store, FleetOptions options,
                       const SnapshotHolder* snapshots, ServerMetrics* metrics, Clock* clock)
    : store_(std::move(store)),
      options_(std::move(options)),
      snapshots_(snapshots),
      metrics_(metrics),
      clock_(clock),
      write_behind_([this](const std::vector<store::EncodedDevice>& batch) {
                      return store_->UpsertEncodedDevices(batch);
                    },
                    options_.write_behind),
      evidence_(std::make_shared<const Evidence>()) {}

FleetState::~FleetState() { Shutdown(); }

void FleetState::Start(HealthListener listener) {
  {
    std::lock_guard lock(health_mutex_);
    listener_ = std::move(listener);
  }
  RefreshNow();
  refresher_ = std::thread([this] { RefresherLoop(); });
}

void FleetState::Shutdown() {
  {
    std::lock_guard lock(refresher_mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_ = true;
  }
  refresher_wake_.notify_all();
  if (refresher_.joinable()) refresher_.join();
  write_behind_.Shutdown();
  const store::WriteBehindCounters counters = write_behind_.counters();
  metrics_->SetWriteBehind(counters);
  spdlog::info("device registry flushed: {} records written, {} dropped, {} lost to store errors",
               counters.flushed, counters.dropped, counters.failed_records);
}

void FleetState::RecordResolve(const v1::ResolveWeightPathRequest& request,
                               const v1::ResolveWeightPathResponse& decided,
                               const v1::ResolveWeightPathResponse& per_call,
                               std::string_view profile_wire) {
  if (!write_behind_.TryEnqueue(
          EncodeDeviceRecord(request, decided, per_call, clock_->Now(), profile_wire))) {
    metrics_->RecordFleetRecordDropped();
  }
}

void FleetState::ApplyVerification(std::string_view path, std::string_view hardware_class,
                                   std::string_view cpu_model, v1::WeightPathSpec* spec) const {
  const Published<Evidence>::Pin pinned = evidence_.Current();
  const Evidence& evidence = *pinned;
  if (!evidence.store_up) {
    // `verified` keeps the policy's flag the resolver set.
    v1::Verification* verification = spec->mutable_verification();
    verification->set_source(v1::Verification::SOURCE_UNAVAILABLE);
    verification->set_device_count(0);
    verification->set_reason(
        absl::StrCat("fleet store unavailable; verified is the policy's flag (",
                     spec->verified() ? "measured" : "not measured", ")"));
    return;
  }
  if (evidence.cells.empty()) return;  // no reports anywhere: the policy's answer stands
  auto found = evidence.cells.find(EvidenceKey(path, hardware_class, cpu_model));
  if (found == evidence.cells.end()) return;
  spec->set_verified(found->second.verified);
  *spec->mutable_verification() = found->second.verification;
}

bool PolicyNamesPath(const policy::Policy& policy, std::string_view path) {
  for (const policy::PathDefinition& definition : policy.paths()) {
    if (definition.name == path) return true;
  }
  return false;
}

std::vector<store::PathExpectation> FleetState::CurrentExpectations() const {
  std::shared_ptr<const Snapshot> snapshot = snapshots_->Share();
  return store::ExpectationsFromPolicy(*snapshot->policy);
}

absl::StatusOr<v1::ReportMeasurementResponse> FleetState::ReportMeasurement(
    const v1::ReportMeasurementRequest& request) {
  const std::vector<store::PathExpectation> expectations = CurrentExpectations();
  const double fraction = options_.verification.regression_fraction;
  // Filled by the check, which the store calls only for a new measurement
  // (with the device's class stamped), so a retried key is never counted.
  std::string hardware_class;
  bool checked = false;
  const store::RegressionCheck check = [&](const store::StoredMeasurement& measurement) {
    hardware_class = measurement.hardware_class;
    checked = true;
    return store::IsRegression(
        measurement, store::ExpectedFor(expectations, measurement.path, measurement.hardware_class),
        fraction);
  };
  absl::StatusOr<store::RecordMeasurementResult> result =
      store_->RecordMeasurement(request, clock_->Now(), check);
  if (result.status().code() == absl::StatusCode::kNotFound) {
    // The registry is written behind the resolve (up to a flush period
    // later): a device that reports right after resolving is still in the
    // queue. Its record goes to the store now and the report is taken.
    absl::StatusOr<bool> written = write_behind_.WriteThrough(request.device_id());
    if (!written.ok()) {
      result = written.status();
    } else if (*written) {
      result = store_->RecordMeasurement(request, clock_->Now(), check);
    }
  }
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kUnavailable) MarkStore(false);
    return result.status();
  }
  MarkStore(true);
  v1::ReportMeasurementResponse response;
  response.set_measurement_id(result->measurement_id);
  response.set_duplicate(result->duplicate);
  response.set_regression(result->regression.regression);
  response.set_regression_reason(result->regression.reason);
  if (!result->duplicate && checked) {
    // The path is the device's word, and a label value must come from a
    // bounded set: one the policy names, else "other" (a device still on a
    // build an edited policy dropped). The row above keeps the real name.
    const bool named = PolicyNamesPath(*snapshots_->Share()->policy, request.path());
    metrics_->RecordMeasurement(hardware_class, named ? request.path() : kOtherPathLabel,
                                result->regression.regression, result->regression.judged);
    {
      std::lock_guard lock(refresher_mutex_);
      refresh_requested_ = true;
    }
    refresher_wake_.notify_all();
  }
  return response;
}

absl::StatusOr<v1::GetVerificationMatrixResponse> FleetState::VerificationMatrix() {
  std::shared_ptr<const Snapshot> snapshot = snapshots_->Share();
  const std::vector<store::PathExpectation> expectations =
      store::ExpectationsFromPolicy(*snapshot->policy);
  absl::StatusOr<std::vector<v1::VerificationCell>> cells =
      store_->VerificationMatrix(expectations, options_.verification, clock_->Now());
  if (!cells.ok()) {
    if (cells.status().code() == absl::StatusCode::kUnavailable) MarkStore(false);
    return cells.status();
  }
  store::AddPolicyVerifiedCells(expectations, &*cells);
  v1::GetVerificationMatrixResponse response;
  for (v1::VerificationCell& cell : *cells) *response.add_cells() = std::move(cell);
  response.set_policy_version(snapshot->policy->version());
  return response;
}

absl::Status FleetState::RecordAuditEvent(const v1::AuditEvent& event) {
  absl::Status recorded = store_->RecordAuditEvent(event);
  if (recorded.ok()) return recorded;
  metrics_->RecordAuditWriteFailed();
  spdlog::error(
      "audit record not stored ({}): time={} identity=\"{}\" role={} rpc={} target=\"{}\" "
      "result={} message=\"{}\" request={{{}}}",
      recorded.ToString(), absl::FormatTime(FromProtoTime(event.time())), event.identity(),
      event.role(), event.rpc(), event.target(), event.result(), event.message(),
      event.request_summary());
  if (recorded.code() == absl::StatusCode::kUnavailable) MarkStore(false);
  return recorded;
}

bool FleetState::store_up() const { return evidence_.Current()->store_up; }

void FleetState::MarkStore(bool up) {
  evidence_.Update([up](const std::shared_ptr<const Evidence>& current) {
    if (current->store_up == up) return std::shared_ptr<const Evidence>();
    auto next = std::make_shared<Evidence>(*current);
    next->store_up = up;
    return std::shared_ptr<const Evidence>(std::move(next));
  });
  metrics_->SetStoreUp(up);
  std::lock_guard lock(health_mutex_);
  if (reported_up_.has_value() && *reported_up_ == up) return;
  reported_up_ = up;
  if (up) {
    spdlog::info("fleet store {} reachable", store_->backend());
  } else {
    spdlog::warn("fleet store {} unreachable: resolves fall back to the policy's verification",
                 store_->backend());
  }
  if (listener_) listener_(up);
}

void FleetState::RefreshNow() {
  metrics_->SetWriteBehind(write_behind_.counters());
  metrics_->SetWriteBehindPending(write_behind_.pending());
  const absl::Time now = clock_->Now();
  const absl::Duration monotonic_now = clock_->MonotonicNow().SinceOrigin();
  const std::vector<store::PathExpectation> expectations = CurrentExpectations();
  absl::StatusOr<std::vector<v1::VerificationCell>> matrix =
      store_->VerificationMatrix(expectations, options_.verification, now);
  if (!matrix.ok()) {
    spdlog::warn("verification refresh failed: {}", matrix.status().ToString());
    if (matrix.status().code() == absl::StatusCode::kUnavailable) MarkStore(false);
    return;
  }
  std::optional<std::map<std::pair<std::string, std::string>, uint64_t>> seen;
  std::optional<store::DeviceVersionCounts> versions;
  std::optional<store::RunningCounts> running;
  const int64_t counted_at_ns = seen_counted_at_ns_.load();
  if (counted_at_ns == kNeverCounted ||
      monotonic_now - absl::Nanoseconds(counted_at_ns) >= options_.devices_seen_refresh_interval) {
    // The same window and moment for all three gauges, so their totals agree.
    const absl::Time seen_since = now - options_.devices_seen_window;
    absl::StatusOr<std::map<std::pair<std::string, std::string>, uint64_t>> counted =
        store_->DevicesSeenByClassAndPath(seen_since);
    absl::StatusOr<store::DeviceVersionCounts> by_version =
        counted.ok() ? store_->CountDevicesByVersion(seen_since) : counted.status();
    absl::StatusOr<store::RunningCounts> by_running =
        by_version.ok() ? store_->CountRunning(seen_since, now - options_.drift_persistent_after)
                        : by_version.status();
    if (!by_running.ok()) {
      spdlog::warn("devices-seen refresh failed: {}", by_running.status().ToString());
      if (by_running.status().code() == absl::StatusCode::kUnavailable) MarkStore(false);
      return;
    }
    seen = std::move(*counted);
    versions = std::move(*by_version);
    running = std::move(*by_running);
    seen_counted_at_ns_.store(absl::ToInt64Nanoseconds(monotonic_now));
  }

  // Measurements name any path a device sent. Only the policy's paths can be
  // handed out, so only they need evidence in memory, and only they may
  // become weightpath_path_verified labels.
  const std::shared_ptr<const policy::Policy> policy = snapshots_->Share()->policy;
  absl::flat_hash_set<std::string_view> policy_paths;
  for (const policy::PathDefinition& definition : policy->paths()) {
    policy_paths.insert(definition.name);
  }
  auto next = std::make_shared<Evidence>();
  std::map<std::pair<std::string, std::string>, bool> path_verified;
  for (const store::PathExpectation& expectation : expectations) {
    if (expectation.hardware_class.empty()) continue;
    bool& verified = path_verified[{expectation.hardware_class, expectation.path}];
    verified = verified || expectation.policy_verified;
  }
  for (const v1::VerificationCell& cell : *matrix) {
    if (!policy_paths.contains(cell.path())) continue;
    store::DeviceVerification verification;
    verification.verified = cell.verified();
    verification.verification = cell.verification();
    next->cells.emplace(EvidenceKey(cell.path(), cell.hardware_class(), cell.cpu_model()),
                        std::move(verification));
    bool& verified = path_verified[{cell.hardware_class(), cell.path()}];
    verified = verified || cell.verified();
  }
  evidence_.Publish(std::move(next));
  if (seen.has_value()) metrics_->SetDevicesSeen(*seen);
  if (running.has_value()) metrics_->SetDevicesDrifted(running->drifted);
  if (versions.has_value()) {
    metrics_->SetDevicesByVersion(versions->by_policy_version, versions->by_agent_version,
                                  policy->version());
  }
  metrics_->SetPathVerified(path_verified);
  MarkStore(true);
  MaybePruneAudit(now, monotonic_now);
}

void FleetState::MaybePruneAudit(absl::Time now, absl::Duration monotonic_now) {
  const int64_t pruned_at_ns = audit_pruned_at_ns_.load();
  if (pruned_at_ns != kNeverCounted &&
      monotonic_now - absl::Nanoseconds(pruned_at_ns) < options_.audit_prune_interval) {
    return;
  }
  audit_pruned_at_ns_.store(absl::ToInt64Nanoseconds(monotonic_now));
  store::AuditRetention retention;
  if (options_.audit_retention > absl::ZeroDuration()) retention.older_than = now - options_.audit_retention;
  retention.keep_newest = options_.audit_max_events;
  if (retention.older_than == absl::InfinitePast() && retention.keep_newest == 0) return;
  absl::StatusOr<uint64_t> pruned = store_->PruneAuditEvents(retention);
  if (!pruned.ok()) {
    spdlog::warn("audit retention not applied: {}", pruned.status().ToString());
    return;
  }
  if (*pruned > 0) {
    spdlog::info("audit retention: deleted {} events (older than {} or beyond the newest {})",
                 *pruned, absl::FormatDuration(options_.audit_retention), options_.audit_max_events);
    metrics_->RecordAuditEventsPruned(*pruned);
  }
}

void FleetState::RefresherLoop() {
  NameThisThread("wp-fleet-state");
  std::unique_lock lock(refresher_mutex_);
  while (!stopping_) {
    refresher_wake_.wait_for(lock, absl::ToChronoNanoseconds(options_.refresh_interval),
                             [this] { return stopping_ || refresh_requested_; });
    if (stopping_) break;
    refresh_requested_ = false;
    lock.unlock();
    RefreshNow();
    lock.lock();
  }
}

}  // namespace weightpath::server
