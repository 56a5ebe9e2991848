// Fleet state: the device registry, measurements, rollouts and outcomes,
// behind one interface with two real backends (embedded SQLite for a single
// server, PostgreSQL shared by several replicas).
//
// Every call is a complete unit of work: what returns OK is committed. A
// FleetStore is safe to share between threads.
// Errors: INVALID_ARGUMENT names the field at fault; NOT_FOUND names the id;
// UNAVAILABLE means the database could not be reached (callers retry);
// ABORTED means a stale revision (re-read and retry).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/map.h"
#include "store/encoded_device.h"
#include "store/verification.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/rollout.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::store {

using DeviceLabels = google::protobuf::Map<std::string, std::string>;

inline constexpr uint32_t kDefaultPageSize = 100;
inline constexpr uint32_t kMaxPageSize = 1000;

struct DeviceQuery {
  // Filters applied in SQL; empty / unset means any.
  std::string hardware_class;
  std::string path;
  std::optional<absl::Time> seen_since;
  // Applied to each row after SQL (the label-selector parser lives in deploy/).
  std::function<bool(const DeviceLabels&)> label_predicate;
  uint32_t page_size = 0;  // 0: kDefaultPageSize; above kMaxPageSize is INVALID_ARGUMENT
  std::string page_token;  // from a previous DevicePage; "" for the first page
  // Fill each device's hardware_profile and profile_recorded_at (GetDevice
  // always does): for callers that evaluate the devices, not for listings.
  bool with_profiles = false;
  // Only devices that run another build than their assignment (Device.drift).
  bool drifted_only = false;
};

struct DevicePage {
  std::vector<v1::Device> devices;  // ordered by device_id
  std::string next_page_token;      // "" on the last page
};

// What the fleet runs, for devices seen within a window that said what they
// run: by class and that path ("" when nothing runs; devices that have not
// said are the rest of FleetSummary's count), and the drifted ones by class
// and reason (store/device_drift.h).
struct DriftCount {
  uint64_t devices = 0;
  uint64_t persistent = 0;  // drifting since before `persistent_before`
};
struct RunningCounts {
  std::map<std::pair<std::string, std::string>, uint64_t> by_class_and_running_path;
  std::map<std::pair<std::string, std::string>, DriftCount> drifted;  // (class, reason)
};

// Judges a measurement against the policy's expectations before it is
// stored; usually [&](const StoredMeasurement& m) { return IsRegression(...); }.
using RegressionCheck = std::function<RegressionVerdict(const StoredMeasurement&)>;

struct RecordMeasurementResult {
  std::string measurement_id;
  bool duplicate = false;  // the key was recorded before; nothing new stored
  RegressionVerdict regression;  // as judged when first recorded
};

// Devices seen within a window, by the version strings their last record
// carried ("" for a device whose record predates schema 6 and has not been
// rewritten since, or that sent none).
struct DeviceVersionCounts {
  std::map<std::string, uint64_t> by_policy_version;
  std::map<std::string, uint64_t> by_agent_version;
};

// ListAuditEvents' limit: 0 means kDefaultAuditLimit.
inline constexpr uint32_t kDefaultAuditLimit = 1000;
inline constexpr uint32_t kMaxAuditLimit = 10000;

// Where a page of audit events ends: events order by time, then by the
// store's id for events of one microsecond.
struct AuditCursor {
  int64_t time_us = 0;
  int64_t id = 0;
};

// Which page of ListAuditEvents: the events before `before` (none: the
// newest), at most `max_bytes` of them as encoded (0: no byte bound; at least
// one event is always returned).
struct AuditPageRequest {
  std::optional<AuditCursor> before;
  size_t max_bytes = 0;
};

struct AuditEventList {
  std::vector<v1::AuditEvent> events;  // oldest first
  bool truncated = false;              // more events matched than the limit or the bytes
  std::optional<AuditCursor> oldest;   // the first event's cursor, when truncated
};

// Audit retention: events older than `older_than` go, and beyond the newest
// `keep_newest` the oldest go; at most `max_deleted` a call, so one pass
// never holds the store's write lock for long.
struct AuditRetention {
  absl::Time older_than = absl::InfinitePast();
  uint64_t keep_newest = 0;  // 0: no bound on the count
  uint32_t max_deleted = 10000;
};

struct StoredRollout {
  v1::Rollout rollout;
  int64_t revision = 0;  // pass to UpdateRollout as expected_revision
};

// The outcome history of one device in one rollout, folded for gate checks.
struct DeviceOutcomes {
  std::string device_id;
  std::string rollout_id;
  // Latest lifecycle outcome (anything but OUTCOME_TASKS); UNSPECIFIED when
  // the device has only sent task counts.
  v1::Outcome latest_outcome = v1::OUTCOME_UNSPECIFIED;
  absl::Time latest_observed_at = absl::InfinitePast();
  std::string latest_detail;
  bool engine_started = false;  // ever reported OUTCOME_ENGINE_STARTED
  uint64_t tasks_completed = 0;  // summed over OUTCOME_TASKS reports
  uint64_t tasks_undone = 0;
  uint64_t tasks_failed = 0;
  uint64_t reports = 0;
  absl::Time last_report_at = absl::InfinitePast();
};

// What GetDevice returns of a device's own reports (Device.recent_*).
inline constexpr uint32_t kRecentDeviceReports = 10;
inline constexpr uint32_t kMaxRecentDeviceReports = 1000;

struct DeviceReports {
  std::vector<v1::DeviceMeasurement> measurements;  // newest received first
  std::vector<v1::DeviceOutcome> outcomes;          // newest received first
};

class FleetStore {
 public:
  virtual ~FleetStore() = default;

  virtual std::string_view backend() const = 0;  // "sqlite" | "postgres"
  virtual int schema_version() const = 0;
  // Cheap round trip for health checks; UNAVAILABLE when the database is down.
  virtual absl::Status Ping() = 0;

  // --- Device registry -----------------------------------------------------
  // Each device needs device_id and last_seen. A new device's first_seen is
  // its first last_seen; an existing one keeps first_seen, and a record older
  // than what is stored changes nothing. regression_count/last_regression are
  // the store's own and ignored here. A device whose record (all but those
  // times and figures) is unchanged only has its last_seen moved.
  absl::Status UpsertDevices(const std::vector<v1::Device>& batch);
  // The same for records already encoded (the write-behind path).
  virtual absl::Status UpsertEncodedDevices(const std::vector<EncodedDevice>& batch) = 0;
  virtual absl::StatusOr<v1::Device> GetDevice(std::string_view device_id) = 0;
  virtual absl::StatusOr<DevicePage> ListDevices(const DeviceQuery& query) = 0;
  // The device's newest `limit` measurements and newest `limit` outcomes,
  // newest received first (the server's clock: a device's own measured_at
  // or observed_at cannot bury its later reports). No rows for an unknown
  // device; limit 0 or above kMaxRecentDeviceReports is INVALID_ARGUMENT.
  virtual absl::StatusOr<DeviceReports> RecentDeviceReports(std::string_view device_id,
                                                            uint32_t limit) = 0;
  // Devices with last_seen >= seen_since, counted by class x path.
  virtual absl::StatusOr<v1::FleetSummaryResponse> FleetSummary(absl::Time seen_since) = 0;
  // The same counts keyed (hardware_class, path), for the devices-seen gauge.
  absl::StatusOr<std::map<std::pair<std::string, std::string>, uint64_t>>
  DevicesSeenByClassAndPath(absl::Time since);

  // Devices with last_seen >= seen_since by what they run (RunningCounts).
  virtual absl::StatusOr<RunningCounts> CountRunning(absl::Time seen_since,
                                                     absl::Time persistent_before) = 0;

  // Devices with last_seen >= seen_since, by policy_version and by
  // agent_version (one scan of the sightings).
  virtual absl::StatusOr<DeviceVersionCounts> CountDevicesByVersion(absl::Time seen_since) = 0;

  // --- Measurements --------------------------------------------------------
  // Validates (ValidateMeasurement), requires the device to be registered,
  // stamps the row with the device's hardware class and CPU model, and commits
  // durably before returning. A repeated idempotency_key of the same device
  // stores nothing and returns the first result with duplicate = true; keys
  // are per device, so another device's key is no duplicate. measured_at defaults to
  // received_at.
  virtual absl::StatusOr<RecordMeasurementResult> RecordMeasurement(
      const v1::ReportMeasurementRequest& request, absl::Time received_at,
      const RegressionCheck& regression_check = nullptr) = 0;
  // Measurements with measured_at >= since, oldest first.
  virtual absl::StatusOr<std::vector<StoredMeasurement>> ListMeasurements(absl::Time since) = 0;
  // The seed's table rebuilt from the fleet: reports within config.window
  // before `now`, judged against `expectations`.
  absl::StatusOr<std::vector<v1::VerificationCell>> VerificationMatrix(
      const std::vector<PathExpectation>& expectations, const VerificationConfig& config,
      absl::Time now);

  // --- Rollouts (state only; decisions live in deploy/) --------------------
  // ALREADY_EXISTS when the id is taken. Returns revision 1.
  virtual absl::StatusOr<int64_t> CreateRollout(const v1::Rollout& rollout) = 0;
  // Replaces the rollout if its stored revision is still `expected_revision`
  // and it is the same rollout (its created_at: revisions start again at 1
  // when an id is deleted and reused), returning the new revision; ABORTED
  // when another writer got there first.
  virtual absl::StatusOr<int64_t> UpdateRollout(const v1::Rollout& rollout,
                                                int64_t expected_revision) = 0;
  // Removes the rollout row if its stored revision is still
  // `expected_revision`, so the id can be created again; its outcomes stay.
  // NOT_FOUND naming the id; ABORTED when another writer got there first.
  virtual absl::Status DeleteRollout(std::string_view rollout_id, int64_t expected_revision) = 0;
  virtual absl::StatusOr<StoredRollout> GetRollout(std::string_view rollout_id) = 0;
  // Ordered by created_at, then id.
  virtual absl::StatusOr<std::vector<StoredRollout>> ListRollouts() = 0;

  // --- Outcomes ------------------------------------------------------------
  // Validates (ValidateOutcome); returns true when the device sent this key
  // before (nothing stored); keys are per device, like measurements'. observed_at defaults to received_at.
  virtual absl::StatusOr<bool> RecordOutcome(const v1::ReportOutcomeRequest& request,
                                             absl::Time received_at) = 0;
  // One entry per (rollout, device); rollout_id "" means every rollout.
  // Of a rollout that exists, only outcomes received at or after its
  // created_at count: those of an earlier rollout under the same id (deleted
  // since) stay in the table but are not the new rollout's evidence.
  virtual absl::StatusOr<std::vector<DeviceOutcomes>> LatestOutcomes(
      std::string_view rollout_id) = 0;

  // --- Audit trail ---------------------------------------------------------
  // Commits one event durably (event.time required; the store keeps it to
  // the microsecond). The store takes the fields as given: bounding and
  // escaping them is the caller's.
  virtual absl::Status RecordAuditEvent(const v1::AuditEvent& event) = 0;
  // Events with time >= since, oldest first; at most `limit` (0:
  // kDefaultAuditLimit; above kMaxAuditLimit INVALID_ARGUMENT naming limit),
  // the newest ones when more matched.
  virtual absl::StatusOr<AuditEventList> ListAuditEvents(absl::Time since, uint32_t limit,
                                                         const AuditPageRequest& page) = 0;
  absl::StatusOr<AuditEventList> ListAuditEvents(absl::Time since, uint32_t limit) {
    return ListAuditEvents(since, limit, AuditPageRequest{});
  }
  // Deletes what `retention` lets go; returns how many events were deleted.
  virtual absl::StatusOr<uint64_t> PruneAuditEvents(const AuditRetention& retention) = 0;
};

// "sqlite:FILE" or "postgres://USER@HOST:PORT/DB" (any libpq URI). Applies
// migrations; FAILED_PRECONDITION when the database's schema is newer than
// this binary's; INVALID_ARGUMENT for an unknown scheme; UNAVAILABLE when the
// database cannot be reached.
absl::StatusOr<std::unique_ptr<FleetStore>> OpenFleetStore(std::string_view url);

// The newest schema version this binary knows.
int LatestSchemaVersion();

}  // namespace weightpath::store
