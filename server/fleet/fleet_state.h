// The server's side of the fleet store: records resolving devices through
// the write-behind queue, keeps the verification matrix in memory so a
// resolve never waits on the database, takes measurements, and watches
// whether the store is reachable.
//
// Store health (documented choice): when the store cannot be reached,
// ResolveWeightPath keeps answering from the policy (verification source
// UNAVAILABLE, `verified` = the policy's flag), ReportMeasurement answers
// UNAVAILABLE, the health entry "weightpath.v1.FleetAdmin" turns NOT_SERVING
// while "" and "weightpath.v1.WeightPath" stay SERVING, and the gauge
// weightpath_store_up drops to 0. The next successful refresh restores all
// of it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "server/observability/metrics.h"
#include "server/config/policy_snapshot.h"
#include "server/config/published.h"
#include "store/store.h"
#include "store/verification.h"
#include "store/write_behind.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

struct FleetOptions {
  store::VerificationConfig verification;
  // Devices whose last resolve is within this window count in
  // weightpath_devices_seen.
  absl::Duration devices_seen_window = absl::Hours(24);
  // How often the matrix and store health are re-read; an accepted
  // measurement also triggers a refresh at once.
  absl::Duration refresh_interval = absl::Seconds(5);
  // How often the devices-seen gauge is recounted (at a refresh): a count
  // scans every device's sighting, and a gauge over a 24 h window does not
  // need that every few seconds.
  absl::Duration devices_seen_refresh_interval = absl::Minutes(1);
  // Drifted devices (running another build than assigned) are counted with
  // the devices-seen gauge; those drifting this long are "persistent".
  absl::Duration drift_persistent_after = absl::Hours(1);
  store::WriteBehindOptions write_behind;
  // Audit retention: events older than audit_retention, and the oldest beyond
  // the newest audit_max_events (0: no bound on either), deleted at a refresh
  // at most every audit_prune_interval, at most 10,000 a pass.
  absl::Duration audit_retention = absl::Hours(90 * 24);
  uint64_t audit_max_events = 200'000;
  absl::Duration audit_prune_interval = absl::Minutes(1);
};

class FleetState {
 public:
  // Called with true/false whenever the store's reachability changes.
  using HealthListener = std::function<void(bool store_up)>;

  // Time is read through `clock` only: the wall clock for what is stored
  // (a device's last_seen, a measurement's receipt, the verification
  // window), the monotonic clock for how long ago the devices were counted.
  FleetState(std::unique_ptr<store::FleetStore> store, FleetOptions options,
             const SnapshotHolder* snapshots, ServerMetrics* metrics,
             Clock* clock = SystemClockInstance());
  ~FleetState();  // Shutdown()
  FleetState(const FleetState&) = delete;
  FleetState& operator=(const FleetState&) = delete;

  // Reads the store once (so the first resolves already see the evidence)
  // and starts the refresher.
  void Start(HealthListener listener);
  // Writes every queued device record, then stops the refresher.
  void Shutdown();

  // Never blocks on the store: a full queue drops the record and counts it.
  // The response in its two parts (server/resolver.h); the per-call part
  // wins where both carry a field. `profile_wire`: the request's profile as
  // the device sent it, when the caller has its bytes (else serialized).
  void RecordResolve(const v1::ResolveWeightPathRequest& request,
                     const v1::ResolveWeightPathResponse& decided,
                     const v1::ResolveWeightPathResponse& per_call,
                     std::string_view profile_wire = {});
  void RecordResolve(const v1::ResolveWeightPathRequest& request,
                     const v1::ResolveWeightPathResponse& response) {
    RecordResolve(request, response, response);
  }
  // Replaces the resolver's policy-only verification in `spec` (`verified`
  // already holds the policy's flag) with the fleet's evidence for this
  // (path, class, CPU model), from memory.
  void ApplyVerification(std::string_view path, std::string_view hardware_class,
                         std::string_view cpu_model, v1::WeightPathSpec* spec) const;
  void ApplyVerification(const v1::ResolveWeightPathRequest& request,
                         v1::ResolveWeightPathResponse* response) const {
    ApplyVerification(response->weight_path().name(), response->hardware_class(),
                      request.profile().cpu_model(), response->mutable_weight_path());
  }

  // Validates, stores durably, judges regressions. INVALID_ARGUMENT naming
  // the field, NOT_FOUND for a device that never resolved (one whose record
  // still waits in the write-behind queue is written first and accepted),
  // UNAVAILABLE when the store is down.
  absl::StatusOr<v1::ReportMeasurementResponse> ReportMeasurement(
      const v1::ReportMeasurementRequest& request);

  // Commits one audited FleetAdmin call. A failure is counted
  // (weightpath_audit_write_failures_total) and logged with the whole
  // event, so the trail is in the log when the store refused it; an
  // UNAVAILABLE store is marked down as any other store failure.
  absl::Status RecordAuditEvent(const v1::AuditEvent& event);

  // The matrix read fresh from the store, for operators.
  absl::StatusOr<v1::GetVerificationMatrixResponse> VerificationMatrix();

  store::FleetStore& store() { return *store_; }
  // The policy and catalog served now.
  std::shared_ptr<const Snapshot> CurrentSnapshot() const { return snapshots_->Share(); }
  bool store_up() const;
  // Refreshes now, in the calling thread (tests and the refresher).
  void RefreshNow();

 private:
  struct Evidence {
    bool store_up = true;
    // Key: path '\0' hardware class '\0' normalised CPU model.
    absl::flat_hash_map<std::string, store::DeviceVerification> cells;
  };

  void RefresherLoop();
  void MarkStore(bool up);

  std::vector<store::PathExpectation> CurrentExpectations() const;

  const std::unique_ptr<store::FleetStore> store_;
  const FleetOptions options_;
  const SnapshotHolder* const snapshots_;
  ServerMetrics* const metrics_;
  Clock* const clock_;
  store::DeviceWriteBehind write_behind_;

  // Replaced whole by each refresh; a resolve reads it without a lock.
  Published<Evidence> evidence_;

  std::mutex health_mutex_;
  HealthListener listener_;
  std::optional<bool> reported_up_;

  // When the devices-seen gauge was last counted: monotonic nanoseconds since
  // the clock's origin, kNeverCounted before the first count.
  static constexpr int64_t kNeverCounted = std::numeric_limits<int64_t>::min();
  std::atomic<int64_t> seen_counted_at_ns_{kNeverCounted};
  // When audit retention last ran, the same way.
  std::atomic<int64_t> audit_pruned_at_ns_{kNeverCounted};
  // Applies audit retention when audit_prune_interval has passed since it last ran.
  void MaybePruneAudit(absl::Time now, absl::Duration monotonic_now);

  std::mutex refresher_mutex_;
  std::condition_variable refresher_wake_;
  bool refresh_requested_ = false;
  bool stopping_ = false;
  bool shut_down_ = false;
  std::thread refresher_;
};

// The weightpath_measurements_total path label of a measurement whose path
// the current policy does not name.
inline constexpr char kOtherPathLabel[] = "other";

// Whether some path definition of `policy` has this name.
bool PolicyNamesPath(const policy::Policy& policy, std::string_view path);

// "path\0class\0normalised cpu" as Evidence keys it.
std::string EvidenceKey(std::string_view path, std::string_view hardware_class,
                        std::string_view cpu_model);

}  // namespace weightpath::server
