// FleetStore written once over SqlDatabase; the SQL below is accepted by
// both SQLite (3.35+: RETURNING, upsert) and PostgreSQL 15.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/device_drift.h"
#include "store/device_upsert.h"
#include "store/encoded_device.h"
#include "store/measurement_validation.h"
#include "store/page_token.h"
#include "store/schema.h"
#include "store/sql_database.h"
#include "store/store.h"
#include "store/time_convert.h"

namespace weightpath::store {
namespace {

// A device is its sighting (last_seen, and what lists filter on) joined to
// its record.
// With what it last said it runs, if it did.
constexpr char kDeviceColumns[] =
    "s.device_id, d.first_seen_us, s.last_seen_us, d.regression_count, d.last_regression, d.body, "
    "d.rollout_id, d.rollout_since_us, d.assigned_key, d.assigned_since_us, r.build_key, "
    "r.outcome, r.source, r.received_at_us, r.since_us, r.body";
constexpr size_t kDeviceColumnCount = 16;
// The stored profile, read only where it is shown or evaluated (GetDevice,
// DeviceQuery::with_profiles): a listing page stays the size of its records.
constexpr char kDeviceProfileColumns[] = ", d.profile, d.profile_recorded_us";
constexpr char kDeviceTables[] =
    "device_sightings s JOIN devices d ON d.device_id = s.device_id "
    "LEFT JOIN device_running r ON r.device_id = s.device_id";
// Devices whose running build is not their assignment (DriftOf's first test,
// in SQL); a device without a running report has r.build_key NULL.
constexpr char kDriftedCondition[] =
    "d.assigned_key <> '' AND r.build_key IS NOT NULL AND r.build_key <> d.assigned_key";

// The running record at `first` (r.build_key, r.outcome, r.source,
// r.received_at_us, r.since_us); nullopt for a device without one.
absl::StatusOr<std::optional<RunningRecord>> RunningFromRow(const SqlRow& row, size_t first) {
  if (!row[first].has_value()) return std::nullopt;
  RunningRecord running;
  running.build_key = CellText(row[first]);
  ASSIGN_OR_RETURN(int64_t outcome, CellInt(row[first + 1], "device_running.outcome"));
  ASSIGN_OR_RETURN(int64_t source, CellInt(row[first + 2], "device_running.source"));
  ASSIGN_OR_RETURN(int64_t received_us, CellInt(row[first + 3], "device_running.received_at_us"));
  ASSIGN_OR_RETURN(int64_t since_us, CellInt(row[first + 4], "device_running.since_us"));
  running.outcome = v1::Outcome_IsValid(static_cast<int>(outcome)) ? static_cast<v1::Outcome>(outcome)
                                                                   : v1::OUTCOME_UNSPECIFIED;
  running.source = v1::BootSource_IsValid(static_cast<int>(source))
                       ? static_cast<v1::BootSource>(source)
                       : v1::BOOT_SOURCE_UNSPECIFIED;
  running.received_at = FromMicros(received_us);
  running.since = FromMicros(since_us);
  return running;
}

absl::StatusOr<v1::Device> DeviceFromRow(const SqlRow& row) {
  v1::Device device;
  if (!device.ParseFromString(CellText(row[5]))) {
    return absl::DataLossError(absl::StrCat("devices.body of ", CellText(row[0]),
                                            " does not parse as weightpath.v1.Device"));
  }
  device.set_device_id(CellText(row[0]));
  ASSIGN_OR_RETURN(int64_t first_seen, CellInt(row[1], "devices.first_seen_us"));
  ASSIGN_OR_RETURN(int64_t last_seen, CellInt(row[2], "device_sightings.last_seen_us"));
  ASSIGN_OR_RETURN(int64_t regressions, CellInt(row[3], "devices.regression_count"));
  *device.mutable_first_seen() = ToTimestamp(FromMicros(first_seen));
  *device.mutable_last_seen() = ToTimestamp(FromMicros(last_seen));
  device.set_regression_count(static_cast<uint32_t>(regressions));
  device.set_last_regression(CellText(row[4]));
  ASSIGN_OR_RETURN(int64_t rollout_since, CellInt(row[7], "devices.rollout_since_us"));
  // Only while the column's rollout is the body's: a row from before the
  // column existed says nothing of when its rollout reached it.
  if (rollout_since != 0 && !device.rollout_id().empty() && CellText(row[6]) == device.rollout_id()) {
    *device.mutable_rollout_since() = ToTimestamp(FromMicros(rollout_since));
  }
  ASSIGN_OR_RETURN(const std::optional<RunningRecord> running, RunningFromRow(row, 10));
  if (running.has_value()) {
    if (!device.mutable_running()->ParseFromString(CellText(row[15]))) {
      return absl::DataLossError(absl::StrCat("device_running.body of ", CellText(row[0]),
                                              " does not parse as weightpath.v1.RunningBuild"));
    }
    *device.mutable_running_reported_at() = ToTimestamp(running->received_at);
    *device.mutable_running_since() = ToTimestamp(running->since);
    ASSIGN_OR_RETURN(int64_t assigned_since, CellInt(row[9], "devices.assigned_since_us"));
    if (const std::optional<DriftVerdict> drift =
            DriftOf(CellText(row[8]), FromMicros(assigned_since), running)) {
      device.mutable_drift()->set_reason(std::string(drift->reason));
      *device.mutable_drift()->mutable_since() = ToTimestamp(drift->since);
    }
  }
  constexpr size_t kProfile = kDeviceColumnCount;
  if (row.size() > kProfile + 1 && row[kProfile].has_value()) {
    if (!device.mutable_hardware_profile()->ParseFromString(*row[kProfile])) {
      return absl::DataLossError(absl::StrCat("devices.profile of ", CellText(row[0]),
                                              " does not parse as weightpath.v1.HardwareProfile"));
    }
    ASSIGN_OR_RETURN(int64_t recorded, CellInt(row[kProfile + 1], "devices.profile_recorded_us"));
    if (recorded != 0) *device.mutable_profile_recorded_at() = ToTimestamp(FromMicros(recorded));
  }
  return device;
}

constexpr char kMeasurementColumns[] =
    "id, idempotency_key, device_id, hardware_class, cpu_model, model, path, engine_version, "
    "decode_tok_s, prefill_tok_s, gemm_ms_per_step, step_ms, threads, fidelity_exact_matches, "
    "fidelity_prompts, measured_at_us, received_at_us, regression, regression_reason";

absl::StatusOr<StoredMeasurement> MeasurementFromRow(const SqlRow& row) {
  StoredMeasurement m;
  m.measurement_id = CellText(row[0]);
  m.idempotency_key = CellText(row[1]);
  m.device_id = CellText(row[2]);
  m.hardware_class = CellText(row[3]);
  m.cpu_model = CellText(row[4]);
  m.model = CellText(row[5]);
  m.path = CellText(row[6]);
  m.engine_version = CellText(row[7]);
  ASSIGN_OR_RETURN(m.decode_tok_s, CellDouble(row[8], "decode_tok_s"));
  ASSIGN_OR_RETURN(m.prefill_tok_s, CellDouble(row[9], "prefill_tok_s"));
  ASSIGN_OR_RETURN(m.gemm_ms_per_step, CellDouble(row[10], "gemm_ms_per_step"));
  ASSIGN_OR_RETURN(m.step_ms, CellDouble(row[11], "step_ms"));
  ASSIGN_OR_RETURN(int64_t threads, CellInt(row[12], "threads"));
  ASSIGN_OR_RETURN(int64_t exact, CellInt(row[13], "fidelity_exact_matches"));
  ASSIGN_OR_RETURN(int64_t prompts, CellInt(row[14], "fidelity_prompts"));
  ASSIGN_OR_RETURN(int64_t measured_at, CellInt(row[15], "measured_at_us"));
  ASSIGN_OR_RETURN(int64_t received_at, CellInt(row[16], "received_at_us"));
  ASSIGN_OR_RETURN(int64_t regression, CellInt(row[17], "regression"));
  m.threads = static_cast<uint32_t>(threads);
  m.fidelity_exact_matches = static_cast<uint32_t>(exact);
  m.fidelity_prompts = static_cast<uint32_t>(prompts);
  m.measured_at = FromMicros(measured_at);
  m.received_at = FromMicros(received_at);
  m.regression = regression != 0;
  m.regression_reason = CellText(row[18]);
  return m;
}

absl::StatusOr<StoredRollout> RolloutFromRow(const SqlRow& row) {
  StoredRollout stored;
  if (!stored.rollout.ParseFromString(CellText(row[2]))) {
    return absl::DataLossError(absl::StrCat("rollouts.body of ", CellText(row[0]),
                                            " does not parse as weightpath.v1.Rollout"));
  }
  ASSIGN_OR_RETURN(stored.revision, CellInt(row[1], "rollouts.revision"));
  return stored;
}

class SqlFleetStore : public FleetStore {
 public:
  SqlFleetStore(std::unique_ptr<SqlDatabase> database, int schema_version)
      : database_(std::move(database)), schema_version_(schema_version) {}

  std::string_view backend() const override {
    return database_->dialect() == SqlDialect::kSqlite ? "sqlite" : "postgres";
  }
  int schema_version() const override { return schema_version_; }

  absl::Status Ping() override {
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    return session->Query("SELECT 1").status();
  }

  absl::Status UpsertEncodedDevices(const std::vector<EncodedDevice>& batch) override {
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    return UpsertDeviceBatch(*session, database_->dialect(), batch);
  }

  absl::StatusOr<v1::Device> GetDevice(std::string_view device_id) override {
    ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
    ASSIGN_OR_RETURN(SqlRows rows,
                     session->Query(absl::StrCat("SELECT ", kDeviceColumns, kDeviceProfileColumns,
                                                 " FROM ", kDeviceTables, " WHERE s.device_id = $1"),
                                    {std::string(device_id)}));
    if (rows.empty()) {
      return absl::NotFoundError(absl::StrCat("device_id \"", std::string(device_id), "\" is not registered"));
    }
    return DeviceFromRow(rows[0]);
  }

  absl::StatusOr<DeviceReports> RecentDeviceReports(std::string_view device_id,
                                                    uint32_t limit) override {
    if (limit == 0 || limit > kMaxRecentDeviceReports) {
      return absl::InvalidArgumentError(absl::StrCat(
          "limit = ", limit, " is outside 1..", kMaxRecentDeviceReports));
    }
    const std::string id(device_id);
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    // Both reads find the device's rows through the leading device_id column
    // of the per-device idempotency key's unique index (schema 5), then sort
    // only that device's rows: no index of its own, and no migration.
    RETURN_IF_ERROR(session->Begin(/*for_write=*/false));
    ASSIGN_OR_RETURN(SqlRows measurement_rows,
                     session->Query(absl::StrCat("SELECT ", kMeasurementColumns,
                                                 " FROM measurements WHERE device_id = $1 "
                                                 "ORDER BY received_at_us DESC, id DESC LIMIT $2"),
                                    {id, int64_t{limit}}));
    ASSIGN_OR_RETURN(
        SqlRows outcome_rows,
        session->Query("SELECT outcome, path, artifact_sha256, policy_version, rollout_id, "
                       "tasks_completed, tasks_undone, tasks_failed, detail, observed_at_us, "
                       "received_at_us FROM outcomes WHERE device_id = $1 "
                       "ORDER BY received_at_us DESC, id DESC LIMIT $2",
                       {id, int64_t{limit}}));
    RETURN_IF_ERROR(session->Commit());
    DeviceReports reports;
    for (const SqlRow& row : measurement_rows) {
      ASSIGN_OR_RETURN(StoredMeasurement m, MeasurementFromRow(row));
      v1::DeviceMeasurement& out = reports.measurements.emplace_back();
      out.set_measurement_id(m.measurement_id);
      out.set_model(m.model);
      out.set_path(m.path);
      out.set_engine_version(m.engine_version);
      out.set_decode_tok_s(m.decode_tok_s);
      out.set_prefill_tok_s(m.prefill_tok_s);
      out.set_gemm_ms_per_step(m.gemm_ms_per_step);
      out.set_step_ms(m.step_ms);
      out.set_threads(m.threads);
      out.set_fidelity_exact_matches(m.fidelity_exact_matches);
      out.set_fidelity_prompts(m.fidelity_prompts);
      out.set_regression(m.regression);
      out.set_regression_reason(m.regression_reason);
      *out.mutable_measured_at() = ToTimestamp(m.measured_at);
      *out.mutable_received_at() = ToTimestamp(m.received_at);
    }
    for (const SqlRow& row : outcome_rows) {
      v1::DeviceOutcome& out = reports.outcomes.emplace_back();
      ASSIGN_OR_RETURN(int64_t outcome, CellInt(row[0], "outcomes.outcome"));
      ASSIGN_OR_RETURN(int64_t completed, CellInt(row[5], "outcomes.tasks_completed"));
      ASSIGN_OR_RETURN(int64_t undone, CellInt(row[6], "outcomes.tasks_undone"));
      ASSIGN_OR_RETURN(int64_t failed, CellInt(row[7], "outcomes.tasks_failed"));
      ASSIGN_OR_RETURN(int64_t observed_us, CellInt(row[9], "outcomes.observed_at_us"));
      ASSIGN_OR_RETURN(int64_t received_us, CellInt(row[10], "outcomes.received_at_us"));
      out.set_outcome(v1::Outcome_IsValid(static_cast<int>(outcome))
                          ? static_cast<v1::Outcome>(outcome)
                          : v1::OUTCOME_UNSPECIFIED);
      out.set_path(CellText(row[1]));
      out.set_artifact_sha256(CellText(row[2]));
      out.set_policy_version(CellText(row[3]));
      out.set_rollout_id(CellText(row[4]));
      out.set_tasks_completed(static_cast<uint32_t>(completed));
      out.set_tasks_undone(static_cast<uint32_t>(undone));
      out.set_tasks_failed(static_cast<uint32_t>(failed));
      out.set_detail(CellText(row[8]));
      *out.mutable_observed_at() = ToTimestamp(FromMicros(observed_us));
      *out.mutable_received_at() = ToTimestamp(FromMicros(received_us));
    }
    return reports;
  }

  absl::StatusOr<DevicePage> ListDevices(const DeviceQuery& query) override {
    if (query.page_size > kMaxPageSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("page_size = ", query.page_size, " is above the maximum ", kMaxPageSize));
    }
    const uint32_t page_size = query.page_size == 0 ? kDefaultPageSize : query.page_size;
    std::string after;
    if (!query.page_token.empty()) {
      ASSIGN_OR_RETURN(after, DecodePageToken(query.page_token));
    }

    std::string sql = absl::StrCat("SELECT ", kDeviceColumns,
                                   query.with_profiles ? kDeviceProfileColumns : "", " FROM ",
                                   kDeviceTables, " WHERE s.device_id > $1");
    std::vector<SqlValue> params = {std::string()};
    if (!query.hardware_class.empty()) {
      params.push_back(query.hardware_class);
      absl::StrAppend(&sql, " AND s.hardware_class = $", params.size());
    }
    if (!query.path.empty()) {
      params.push_back(query.path);
      absl::StrAppend(&sql, " AND s.path = $", params.size());
    }
    if (query.seen_since.has_value()) {
      params.push_back(ToMicros(*query.seen_since));
      absl::StrAppend(&sql, " AND s.last_seen_us >= $", params.size());
    }
    if (query.drifted_only) absl::StrAppend(&sql, " AND ", kDriftedCondition);
    // One row beyond the page tells whether another page exists; with a label
    // predicate rows are scanned in larger chunks since some are filtered out.
    const int64_t chunk = query.label_predicate ? std::max<int64_t>(page_size + 1, 512)
                                                : int64_t{page_size} + 1;
    params.push_back(chunk);
    absl::StrAppend(&sql, " ORDER BY s.device_id LIMIT $", params.size());

    DevicePage page;
    bool more = false;
    while (true) {
      params[0] = after;
      // A session per chunk: a long filtered scan must not hold SQLite's only
      // connection while measurements wait to commit.
      ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
      ASSIGN_OR_RETURN(SqlRows rows, session->Query(sql, params));
      for (const SqlRow& row : rows) {
        after = CellText(row[0]);
        ASSIGN_OR_RETURN(v1::Device device, DeviceFromRow(row));
        if (query.label_predicate && !query.label_predicate(device.labels())) continue;
        if (page.devices.size() == page_size) {
          more = true;
          break;
        }
        page.devices.push_back(std::move(device));
      }
      if (more || static_cast<int64_t>(rows.size()) < chunk) break;
    }
    if (more) page.next_page_token = EncodePageToken(page.devices.back().device_id());
    return page;
  }

  absl::StatusOr<v1::FleetSummaryResponse> FleetSummary(absl::Time seen_since) override {
    ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
    ASSIGN_OR_RETURN(SqlRows rows,
                     session->Query("SELECT hardware_class, path, COUNT(*) FROM device_sightings "
                                    "WHERE last_seen_us >= $1 GROUP BY hardware_class, path "
                                    "ORDER BY hardware_class, path",
                                    {ToMicros(seen_since)}));
    v1::FleetSummaryResponse summary;
    uint64_t total = 0;
    for (const SqlRow& row : rows) {
      v1::FleetSummaryResponse::Cell* cell = summary.add_cells();
      cell->set_hardware_class(CellText(row[0]));
      cell->set_path(CellText(row[1]));
      ASSIGN_OR_RETURN(int64_t count, CellInt(row[2], "count"));
      cell->set_devices(static_cast<uint64_t>(count));
      total += static_cast<uint64_t>(count);
    }
    summary.set_total_devices(total);
    return summary;
  }

  absl::StatusOr<RunningCounts> CountRunning(absl::Time seen_since,
                                             absl::Time persistent_before) override {
    ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
    RETURN_IF_ERROR(session->Begin(/*for_write=*/false));
    // Both walk the devices that reported what they run and look each one
    // up by its key, never the whole registry: the devices-seen count
    // (FleetSummary) has the totals already. CROSS JOIN keeps SQLite's
    // planner to that order (it preferred to scan every sighting for the
    // GROUP BY: 0.19 s instead of 0.03 s with 200,000 devices, 20,000 of
    // them reporting); PostgreSQL plans it as any inner join.
    ASSIGN_OR_RETURN(
        SqlRows by_path,
        session->Query("SELECT s.hardware_class, r.path, COUNT(*) FROM device_running r "
                       "CROSS JOIN device_sightings s WHERE s.device_id = r.device_id "
                       "AND s.last_seen_us >= $1 GROUP BY s.hardware_class, r.path",
                       {ToMicros(seen_since)}));
    // Only the drifted rows come back: few, unless the fleet is mid-change.
    ASSIGN_OR_RETURN(
        SqlRows drifted,
        session->Query(absl::StrCat("SELECT s.hardware_class, d.assigned_key, d.assigned_since_us, "
                                    "r.build_key, r.outcome, r.source, r.received_at_us, "
                                    "r.since_us FROM device_running r CROSS JOIN devices d "
                                    "CROSS JOIN device_sightings s WHERE d.device_id = "
                                    "r.device_id AND s.device_id = r.device_id AND "
                                    "s.last_seen_us >= $1 AND ",
                                    kDriftedCondition),
                       {ToMicros(seen_since)}));
    RETURN_IF_ERROR(session->Commit());
    RunningCounts counts;
    for (const SqlRow& row : by_path) {
      ASSIGN_OR_RETURN(int64_t count, CellInt(row[2], "count"));
      counts.by_class_and_running_path[{CellText(row[0]), CellText(row[1])}] +=
          static_cast<uint64_t>(count);
    }
    for (const SqlRow& row : drifted) {
      ASSIGN_OR_RETURN(int64_t assigned_since, CellInt(row[2], "devices.assigned_since_us"));
      ASSIGN_OR_RETURN(const std::optional<RunningRecord> running, RunningFromRow(row, 3));
      const std::optional<DriftVerdict> drift =
          DriftOf(CellText(row[1]), FromMicros(assigned_since), running);
      if (!drift.has_value()) continue;
      DriftCount& count = counts.drifted[{CellText(row[0]), std::string(drift->reason)}];
      ++count.devices;
      if (drift->since < persistent_before) ++count.persistent;
    }
    return counts;
  }

  absl::StatusOr<DeviceVersionCounts> CountDevicesByVersion(absl::Time seen_since) override {
    ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
    // One scan for both counts: grouped by the pair, folded here.
    ASSIGN_OR_RETURN(SqlRows rows,
                     session->Query("SELECT policy_version, agent_version, COUNT(*) FROM "
                                    "device_sightings WHERE last_seen_us >= $1 "
                                    "GROUP BY policy_version, agent_version",
                                    {ToMicros(seen_since)}));
    DeviceVersionCounts counts;
    for (const SqlRow& row : rows) {
      ASSIGN_OR_RETURN(int64_t count, CellInt(row[2], "count"));
      counts.by_policy_version[CellText(row[0])] += static_cast<uint64_t>(count);
      counts.by_agent_version[CellText(row[1])] += static_cast<uint64_t>(count);
    }
    return counts;
  }

  absl::StatusOr<RecordMeasurementResult> RecordMeasurement(
      const v1::ReportMeasurementRequest& request, absl::Time received_at,
      const RegressionCheck& regression_check) override {
    RETURN_IF_ERROR(ValidateMeasurement(request));
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    RETURN_IF_ERROR(session->Begin(/*for_write=*/true));
    ASSIGN_OR_RETURN(std::optional<RecordMeasurementResult> earlier,
                     FindMeasurement(*session, request.device_id(), request.idempotency_key()));
    if (earlier.has_value()) {
      RETURN_IF_ERROR(session->Commit());
      return *earlier;
    }
    ASSIGN_OR_RETURN(SqlRows device_rows,
                     session->Query("SELECT hardware_class, cpu_model FROM devices "
                                    "WHERE device_id = $1",
                                    {request.device_id()}));
    if (device_rows.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "device_id \"", request.device_id(),
          "\" is not registered; a device must resolve its weight path before reporting"));
    }
    StoredMeasurement m;
    m.idempotency_key = request.idempotency_key();
    m.device_id = request.device_id();
    m.hardware_class = CellText(device_rows[0][0]);
    m.cpu_model = CellText(device_rows[0][1]);
    m.model = request.model();
    m.path = request.path();
    m.engine_version = request.engine_version();
    m.decode_tok_s = request.decode_tok_s();
    m.prefill_tok_s = request.prefill_tok_s();
    m.gemm_ms_per_step = request.gemm_ms_per_step();
    m.step_ms = request.step_ms();
    m.threads = request.threads();
    m.fidelity_exact_matches = request.fidelity_exact_matches();
    m.fidelity_prompts = request.fidelity_prompts();
    m.received_at = received_at;
    m.measured_at = request.has_measured_at() ? FromProtoTime(request.measured_at()) : received_at;
    RegressionVerdict verdict = regression_check ? regression_check(m) : RegressionVerdict{};

    ASSIGN_OR_RETURN(
        SqlRows inserted,
        session->Query(
            "INSERT INTO measurements (idempotency_key, device_id, hardware_class, cpu_model, "
            "model, path, engine_version, decode_tok_s, prefill_tok_s, gemm_ms_per_step, "
            "step_ms, threads, fidelity_exact_matches, fidelity_prompts, measured_at_us, "
            "received_at_us, regression, regression_reason) VALUES ($1, $2, $3, $4, $5, $6, $7, "
            "$8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) "
            "ON CONFLICT (device_id, idempotency_key) DO NOTHING RETURNING id",
            {m.idempotency_key, m.device_id, m.hardware_class, m.cpu_model, m.model, m.path,
             m.engine_version, m.decode_tok_s, m.prefill_tok_s, m.gemm_ms_per_step, m.step_ms,
             int64_t{m.threads}, int64_t{m.fidelity_exact_matches}, int64_t{m.fidelity_prompts},
             ToMicros(m.measured_at), ToMicros(m.received_at), int64_t{verdict.regression ? 1 : 0},
             verdict.reason}));
    if (inserted.empty()) {
      // Another replica committed the same key between our check and insert.
      ASSIGN_OR_RETURN(earlier,
                       FindMeasurement(*session, request.device_id(), request.idempotency_key()));
      RETURN_IF_ERROR(session->Commit());
      if (!earlier.has_value()) {
        return absl::AbortedError(absl::StrCat("idempotency_key \"", request.idempotency_key(),
                                               "\" conflicted; retry"));
      }
      return *earlier;
    }
    if (verdict.regression) {
      RETURN_IF_ERROR(session
                          ->Query("UPDATE devices SET regression_count = regression_count + 1, "
                                  "last_regression = $2 WHERE device_id = $1",
                                  {m.device_id, verdict.reason})
                          .status());
    }
    RETURN_IF_ERROR(session->Commit());
    RecordMeasurementResult result;
    result.measurement_id = CellText(inserted[0][0]);
    result.regression = std::move(verdict);
    return result;
  }

  absl::StatusOr<std::vector<StoredMeasurement>> ListMeasurements(absl::Time since) override {
    ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
    ASSIGN_OR_RETURN(SqlRows rows,
                     session->Query(absl::StrCat("SELECT ", kMeasurementColumns,
                                                 " FROM measurements WHERE measured_at_us >= $1 "
                                                 "ORDER BY measured_at_us, id"),
                                    {ToMicros(since)}));
    std::vector<StoredMeasurement> out;
    out.reserve(rows.size());
    for (const SqlRow& row : rows) {
      ASSIGN_OR_RETURN(StoredMeasurement m, MeasurementFromRow(row));
      out.push_back(std::move(m));
    }
    return out;
  }

  absl::StatusOr<int64_t> CreateRollout(const v1::Rollout& rollout) override {
    if (rollout.id().empty()) return absl::InvalidArgumentError("rollout.id is required");
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    ASSIGN_OR_RETURN(
        SqlRows rows,
        session->Query("INSERT INTO rollouts (id, revision, created_at_us, body) "
                       "VALUES ($1, 1, $2, $3) ON CONFLICT (id) DO NOTHING RETURNING revision",
                       {rollout.id(), ToMicros(FromProtoTime(rollout.created_at())),
                        SqlBlob{rollout.SerializeAsString()}}));
    if (rows.empty()) {
      return absl::AlreadyExistsError(absl::StrCat("rollout.id \"", rollout.id(), "\" already exists"));
    }
    return CellInt(rows[0][0], "rollouts.revision");
  }

  absl::StatusOr<int64_t> UpdateRollout(const v1::Rollout& rollout,
                                        int64_t expected_revision) override {
    if (rollout.id().empty()) return absl::InvalidArgumentError("rollout.id is required");
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    // Compare-and-set in one statement: of two replicas updating from the same
    // revision, exactly one matches the WHERE clause. created_at tells a
    // rollout from one deleted and created again under its id, whose
    // revisions count from 1 again: a write read from the old one must not
    // land on the new one.
    const int64_t created_at_us = ToMicros(FromProtoTime(rollout.created_at()));
    ASSIGN_OR_RETURN(SqlRows rows,
                     session->Query("UPDATE rollouts SET body = $1, revision = revision + 1 "
                                    "WHERE id = $2 AND revision = $3 AND created_at_us = $4 "
                                    "RETURNING revision",
                                    {SqlBlob{rollout.SerializeAsString()}, rollout.id(),
                                     expected_revision, created_at_us}));
    if (!rows.empty()) return CellInt(rows[0][0], "rollouts.revision");
    return StaleRolloutWrite(*session, rollout.id(), expected_revision, created_at_us);
  }

  absl::Status DeleteRollout(std::string_view rollout_id, int64_t expected_revision) override {
    const std::string id(rollout_id);
    if (id.empty()) return absl::InvalidArgumentError("rollout.id is required");
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    // The outcomes are left where they are (history); LatestOutcomes tells
    // them from a later rollout's by its created_at.
    ASSIGN_OR_RETURN(SqlRows rows,
                     session->Query("DELETE FROM rollouts WHERE id = $1 AND revision = $2 "
                                    "RETURNING id",
                                    {id, expected_revision}));
    if (!rows.empty()) return absl::OkStatus();
    return StaleRolloutWrite(*session, id, expected_revision, std::nullopt).status();
  }

  absl::StatusOr<StoredRollout> GetRollout(std::string_view rollout_id) override {
    ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
    ASSIGN_OR_RETURN(SqlRows rows,
                     session->Query("SELECT id, revision, body FROM rollouts WHERE id = $1",
                                    {std::string(rollout_id)}));
    if (rows.empty()) {
      return absl::NotFoundError(absl::StrCat("rollout id \"", std::string(rollout_id), "\" does not exist"));
    }
    return RolloutFromRow(rows[0]);
  }

  absl::StatusOr<std::vector<StoredRollout>> ListRollouts() override {
    ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
    ASSIGN_OR_RETURN(SqlRows rows, session->Query("SELECT id, revision, body FROM rollouts "
                                                  "ORDER BY created_at_us, id"));
    std::vector<StoredRollout> out;
    for (const SqlRow& row : rows) {
      ASSIGN_OR_RETURN(StoredRollout stored, RolloutFromRow(row));
      out.push_back(std::move(stored));
    }
    return out;
  }

  absl::StatusOr<bool> RecordOutcome(const v1::ReportOutcomeRequest& request,
                                     absl::Time received_at) override {
    RETURN_IF_ERROR(ValidateOutcome(request));
    const absl::Time observed_at =
        request.has_observed_at() ? FromProtoTime(request.observed_at()) : received_at;
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    // One transaction for the report and what it says runs; a report without
    // it stays one statement.
    if (request.has_running()) RETURN_IF_ERROR(session->Begin(/*for_write=*/true));
    ASSIGN_OR_RETURN(
        SqlRows rows,
        session->Query(
            "INSERT INTO outcomes (idempotency_key, device_id, rollout_id, outcome, path, "
            "artifact_sha256, policy_version, tasks_completed, tasks_undone, tasks_failed, detail, "
            "observed_at_us, received_at_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
            "$11, $12, $13) ON CONFLICT (device_id, idempotency_key) DO NOTHING RETURNING id",
            {request.idempotency_key(), request.device_id(), request.rollout_id(),
             int64_t{request.outcome()}, request.path(), request.artifact_sha256(),
             request.policy_version(), int64_t{request.tasks_completed()},
             int64_t{request.tasks_undone()}, int64_t{request.tasks_failed()}, request.detail(),
             ToMicros(observed_at), ToMicros(received_at)}));
    const bool duplicate = rows.empty();
    if (request.has_running()) {
      if (!duplicate) RETURN_IF_ERROR(RecordRunning(*session, request, observed_at, received_at));
      RETURN_IF_ERROR(session->Commit());
    }
    return duplicate;
  }

  // The last running report received wins (an agent sends its reports in the
  // order it made them, those kept pending first); not by the device's
  // clock, which a device booting before NTP has wrong, and which one
  // report dated far ahead would otherwise freeze. since_us stays while the
  // build it names does.
  static absl::Status RecordRunning(SqlSession& session, const v1::ReportOutcomeRequest& request,
                                    absl::Time observed_at, absl::Time received_at) {
    const v1::RunningBuild& running = request.running();
    const std::string build_key =
        running.nothing_running()
            ? std::string()
            : BuildKey(running.path(), running.model(), running.artifact_sha256());
    // Only the fields this server knows: unknown ones would ride along in
    // every listing page.
    v1::RunningBuild known = running;
    known.DiscardUnknownFields();
    std::string body;
    if (!known.SerializeToString(&body)) {
      return absl::InternalError("running: the report's RunningBuild did not serialize");
    }
    return session
        .Query(
            "INSERT INTO device_running (device_id, build_key, path, source, outcome, "
            "observed_at_us, received_at_us, since_us, body) VALUES ($1, $2, $3, $4, $5, $6, $7, "
            "$8, $9) ON CONFLICT (device_id) DO UPDATE SET since_us = CASE WHEN "
            "device_running.build_key = excluded.build_key THEN device_running.since_us ELSE "
            "excluded.since_us END, build_key = excluded.build_key, path = excluded.path, source = "
            "excluded.source, outcome = excluded.outcome, observed_at_us = excluded.observed_at_us, "
            "received_at_us = excluded.received_at_us, body = excluded.body WHERE "
            "excluded.received_at_us >= device_running.received_at_us",
            {request.device_id(), build_key, running.nothing_running() ? "" : running.path(),
             int64_t{running.source()}, int64_t{request.outcome()}, ToMicros(observed_at),
             ToMicros(received_at), ToMicros(received_at), SqlBlob{body}})
        .status();
  }

  absl::StatusOr<std::vector<DeviceOutcomes>> LatestOutcomes(std::string_view rollout_id) override {
    std::string sql =
        "SELECT rollout_id, device_id, outcome, tasks_completed, tasks_undone, tasks_failed, "
        "detail, observed_at_us, received_at_us FROM outcomes";
    std::vector<SqlValue> params;
    if (!rollout_id.empty()) {
      sql += " WHERE rollout_id = $1";
      params.push_back(std::string(rollout_id));
    }
    sql += " ORDER BY rollout_id, device_id, observed_at_us, id";
    ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
    // The rollouts first: a rollout created after this read has no outcome
    // received before its creation to leave out. Filtered here rather than
    // joined, since the two id columns have different collations on
    // PostgreSQL and SQLite knows neither's name.
    ASSIGN_OR_RETURN(SqlRows rollouts, session->Query("SELECT id, created_at_us FROM rollouts"));
    std::map<std::string, int64_t> created_at_us;
    for (const SqlRow& row : rollouts) {
      ASSIGN_OR_RETURN(created_at_us[CellText(row[0])], CellInt(row[1], "rollouts.created_at_us"));
    }
    ASSIGN_OR_RETURN(SqlRows rows, session->Query(sql, params));
    std::vector<DeviceOutcomes> out;
    for (const SqlRow& row : rows) {
      const std::string row_rollout = CellText(row[0]);
      const std::string row_device = CellText(row[1]);
      if (auto created = created_at_us.find(row_rollout); created != created_at_us.end()) {
        ASSIGN_OR_RETURN(int64_t received_us, CellInt(row[8], "outcomes.received_at_us"));
        if (received_us < created->second) continue;  // an earlier rollout's under this id
      }
      if (out.empty() || out.back().rollout_id != row_rollout ||
          out.back().device_id != row_device) {
        out.emplace_back();
        out.back().rollout_id = row_rollout;
        out.back().device_id = row_device;
      }
      DeviceOutcomes& device = out.back();
      ASSIGN_OR_RETURN(int64_t outcome, CellInt(row[2], "outcomes.outcome"));
      ASSIGN_OR_RETURN(int64_t completed, CellInt(row[3], "outcomes.tasks_completed"));
      ASSIGN_OR_RETURN(int64_t undone, CellInt(row[4], "outcomes.tasks_undone"));
      ASSIGN_OR_RETURN(int64_t failed, CellInt(row[5], "outcomes.tasks_failed"));
      ASSIGN_OR_RETURN(int64_t observed_us, CellInt(row[7], "outcomes.observed_at_us"));
      const absl::Time observed_at = FromMicros(observed_us);
      ++device.reports;
      device.last_report_at = std::max(device.last_report_at, observed_at);
      if (outcome == v1::OUTCOME_TASKS) {
        device.tasks_completed += static_cast<uint64_t>(completed);
        device.tasks_undone += static_cast<uint64_t>(undone);
        device.tasks_failed += static_cast<uint64_t>(failed);
        continue;
      }
      // Rows arrive oldest first, so the last lifecycle row is the latest.
      device.latest_outcome = static_cast<v1::Outcome>(outcome);
      device.latest_observed_at = observed_at;
      device.latest_detail = CellText(row[6]);
      if (outcome == v1::OUTCOME_ENGINE_STARTED) device.engine_started = true;
    }
    return out;
  }

  absl::Status RecordAuditEvent(const v1::AuditEvent& event) override {
    if (!event.has_time()) return absl::InvalidArgumentError("audit event time is required");
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    return session
        ->Query("INSERT INTO audit_events (time_us, identity, role, rpc, target, request_summary, "
                "result, message, replica) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                {ToMicros(FromProtoTime(event.time())), event.identity(), event.role(), event.rpc(),
                 event.target(), event.request_summary(), event.result(), event.message(),
                 event.replica()})
        .status();
  }

  absl::StatusOr<AuditEventList> ListAuditEvents(absl::Time since, uint32_t limit,
                                                 const AuditPageRequest& page) override {
    if (limit > kMaxAuditLimit) {
      return absl::InvalidArgumentError(
          absl::StrCat("limit = ", limit, " is above the maximum ", kMaxAuditLimit));
    }
    if (limit == 0) limit = kDefaultAuditLimit;
    ASSIGN_OR_RETURN(auto session, database_->AcquireForRead());
    // Newest first, in chunks below the cursor (time, then id: the index's
    // order), so a page that stops at its byte bound reads a chunk past it at
    // most, not all `limit` rows. Each chunk asks for one row more than it
    // takes, to tell whether more matched.
    constexpr int64_t kChunkRows = 256;
    AuditEventList list;
    std::vector<v1::AuditEvent> newest_first;
    size_t bytes = 0;
    std::optional<AuditCursor> below = page.before;
    bool more = true;
    while (more && !list.truncated) {
      const int64_t take =
          std::min<int64_t>(kChunkRows, int64_t{limit} - static_cast<int64_t>(newest_first.size()));
      const AuditCursor cursor =
          below.value_or(AuditCursor{std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::max()});
      ASSIGN_OR_RETURN(
          SqlRows rows,
          session->Query("SELECT time_us, identity, role, rpc, target, request_summary, "
                         "result, message, replica, id FROM audit_events "
                         "WHERE time_us >= $1 AND (time_us < $3 OR (time_us = $3 AND id < $4)) "
                         "ORDER BY time_us DESC, id DESC LIMIT $2",
                         {ToMicros(since), take + 1, cursor.time_us, cursor.id}));
      more = static_cast<int64_t>(rows.size()) > take;
      if (more) rows.resize(static_cast<size_t>(take));
      for (const SqlRow& row : rows) {
        v1::AuditEvent event;
        ASSIGN_OR_RETURN(int64_t time_us, CellInt(row[0], "audit_events.time_us"));
        ASSIGN_OR_RETURN(int64_t id, CellInt(row[9], "audit_events.id"));
        *event.mutable_time() = ToTimestamp(FromMicros(time_us));
        event.set_identity(CellText(row[1]));
        event.set_role(CellText(row[2]));
        event.set_rpc(CellText(row[3]));
        event.set_target(CellText(row[4]));
        event.set_request_summary(CellText(row[5]));
        event.set_result(CellText(row[6]));
        event.set_message(CellText(row[7]));
        event.set_replica(CellText(row[8]));
        // As a repeated field: the event's bytes, its tag and its length.
        const size_t encoded = event.ByteSizeLong() + 8;
        if (page.max_bytes > 0 && !newest_first.empty() && bytes + encoded > page.max_bytes) {
          list.truncated = true;
          break;
        }
        bytes += encoded;
        list.oldest = AuditCursor{time_us, id};
        newest_first.push_back(std::move(event));
      }
      if (more && newest_first.size() == limit) list.truncated = true;
      below = list.oldest;
    }
    if (!list.truncated) list.oldest.reset();
    list.events.assign(std::make_move_iterator(newest_first.rbegin()),
                       std::make_move_iterator(newest_first.rend()));
    return list;
  }

  absl::StatusOr<uint64_t> PruneAuditEvents(const AuditRetention& retention) override {
    ASSIGN_OR_RETURN(auto session, database_->Acquire());
    uint64_t deleted = 0;
    int64_t budget = retention.max_deleted;
    // Oldest first by the index, a bounded batch each: the subquery finds
    // the ids, the delete takes them by primary key.
    if (retention.older_than > absl::InfinitePast() && budget > 0) {
      ASSIGN_OR_RETURN(SqlRows gone,
                       session->Query("DELETE FROM audit_events WHERE id IN (SELECT id FROM "
                                      "audit_events WHERE time_us < $1 ORDER BY time_us, id "
                                      "LIMIT $2) RETURNING id",
                                      {ToMicros(retention.older_than), budget}));
      deleted += gone.size();
      budget -= static_cast<int64_t>(gone.size());
    }
    if (retention.keep_newest > 0 && budget > 0) {
      ASSIGN_OR_RETURN(SqlRows count, session->Query("SELECT COUNT(*) FROM audit_events"));
      ASSIGN_OR_RETURN(int64_t events, CellInt(count[0][0], "count"));
      const int64_t excess = events - static_cast<int64_t>(retention.keep_newest);
      if (excess > 0) {
        ASSIGN_OR_RETURN(SqlRows gone,
                         session->Query("DELETE FROM audit_events WHERE id IN (SELECT id FROM "
                                        "audit_events ORDER BY time_us, id LIMIT $1) RETURNING id",
                                        {std::min(excess, budget)}));
        deleted += gone.size();
      }
    }
    return deleted;
  }

 private:
  // Why a compare-and-set on rollout `id` matched no row: NOT_FOUND when
  // there is none, else ABORTED naming what changed since it was read
  // (`created_at_us` unset: the revision alone was compared).
  static absl::StatusOr<int64_t> StaleRolloutWrite(SqlSession& session, const std::string& id,
                                                  int64_t expected_revision,
                                                  std::optional<int64_t> created_at_us) {
    ASSIGN_OR_RETURN(SqlRows current,
                     session.Query("SELECT revision, created_at_us FROM rollouts WHERE id = $1",
                                   {id}));
    if (current.empty()) {
      return absl::NotFoundError(absl::StrCat("rollout.id \"", id, "\" does not exist"));
    }
    ASSIGN_OR_RETURN(int64_t stored_created_at_us, CellInt(current[0][1], "rollouts.created_at_us"));
    if (created_at_us.has_value() && *created_at_us != stored_created_at_us) {
      return absl::AbortedError(absl::StrCat(
          "rollout \"", id, "\" was deleted and created again since it was read; re-read the "
                            "rollout and retry"));
    }
    return absl::AbortedError(absl::StrCat("rollout \"", id, "\": expected_revision ",
                                           expected_revision, " is stale, the store holds revision ",
                                           CellText(current[0][0]),
                                           "; re-read the rollout and retry"));
  }

  // Keys are the device's own (schema 5): another device's use of the same
  // key is a different report.
  absl::StatusOr<std::optional<RecordMeasurementResult>> FindMeasurement(
      SqlSession& session, const std::string& device_id, const std::string& key) {
    ASSIGN_OR_RETURN(SqlRows rows,
                     session.Query("SELECT id, regression, regression_reason FROM measurements "
                                   "WHERE device_id = $1 AND idempotency_key = $2",
                                   {device_id, key}));
    if (rows.empty()) return std::optional<RecordMeasurementResult>();
    RecordMeasurementResult result;
    result.measurement_id = CellText(rows[0][0]);
    result.duplicate = true;
    ASSIGN_OR_RETURN(int64_t regression, CellInt(rows[0][1], "measurements.regression"));
    result.regression.regression = regression != 0;
    result.regression.reason = CellText(rows[0][2]);
    return std::optional<RecordMeasurementResult>(std::move(result));
  }

  std::unique_ptr<SqlDatabase> database_;
  const int schema_version_;
};

}  // namespace

absl::Status FleetStore::UpsertDevices(const std::vector<v1::Device>& batch) {
  // A record without last_seen encodes as last_seen_us 0, which
  // UpsertEncodedDevices refuses naming its index.
  std::vector<EncodedDevice> encoded;
  encoded.reserve(batch.size());
  for (const v1::Device& device : batch) encoded.push_back(EncodeDevice(device));
  return UpsertEncodedDevices(encoded);
}

absl::StatusOr<std::map<std::pair<std::string, std::string>, uint64_t>>
FleetStore::DevicesSeenByClassAndPath(absl::Time since) {
  ASSIGN_OR_RETURN(v1::FleetSummaryResponse summary, FleetSummary(since));
  std::map<std::pair<std::string, std::string>, uint64_t> counts;
  for (const auto& cell : summary.cells()) counts[{cell.hardware_class(), cell.path()}] = cell.devices();
  return counts;
}

absl::StatusOr<std::vector<v1::VerificationCell>> FleetStore::VerificationMatrix(
    const std::vector<PathExpectation>& expectations, const VerificationConfig& config,
    absl::Time now) {
  ASSIGN_OR_RETURN(std::vector<StoredMeasurement> measurements, ListMeasurements(now - config.window));
  return BuildVerificationMatrix(measurements, expectations, config, now);
}

absl::StatusOr<std::unique_ptr<FleetStore>> OpenFleetStore(std::string_view url) {
  ASSIGN_OR_RETURN(std::unique_ptr<SqlDatabase> database, OpenSqlDatabase(url));
  ASSIGN_OR_RETURN(int version, ApplyMigrations(*database));
  return std::make_unique<SqlFleetStore>(std::move(database), version);
}

}  // namespace weightpath::store
