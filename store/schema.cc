#include "store/schema.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace weightpath::store {
namespace {

struct Migration {
  int version;
  const char* description;
  // {id} {blob} {key} {without_rowid} are filled per dialect.
  const char* sql;
  // When the two dialects need different statements (SQLite cannot drop a
  // constraint, so it rebuilds the table): PostgreSQL runs this instead.
  const char* postgres_sql = nullptr;
};

// Append only: a released migration never changes, a new one gets the next
// version. Times are integer microseconds since the Unix epoch.
const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> migrations = {
      {1, "device registry", R"sql(
CREATE TABLE devices (
  device_id {key} PRIMARY KEY,
  hardware_class TEXT NOT NULL,
  path TEXT NOT NULL,
  cpu_model TEXT NOT NULL,
  first_seen_us BIGINT NOT NULL,
  last_seen_us BIGINT NOT NULL,
  regression_count BIGINT NOT NULL DEFAULT 0,
  last_regression TEXT NOT NULL DEFAULT '',
  body {blob} NOT NULL
);
-- Covers FleetSummary and the devices-seen gauge (with or without a
-- seen-since bound): counted from the index alone, never the device bodies.
CREATE INDEX devices_class_path_seen ON devices (hardware_class, path, last_seen_us);
-- Keyset pages of one hardware class, in device_id order without a sort.
CREATE INDEX devices_class_id ON devices (hardware_class, device_id);
)sql"},
      {2, "measurements", R"sql(
CREATE TABLE measurements (
  id {id},
  idempotency_key TEXT NOT NULL UNIQUE,
  device_id TEXT NOT NULL,
  hardware_class TEXT NOT NULL,
  cpu_model TEXT NOT NULL,
  model TEXT NOT NULL,
  path TEXT NOT NULL,
  engine_version TEXT NOT NULL,
  decode_tok_s DOUBLE PRECISION NOT NULL,
  prefill_tok_s DOUBLE PRECISION NOT NULL,
  gemm_ms_per_step DOUBLE PRECISION NOT NULL,
  step_ms DOUBLE PRECISION NOT NULL,
  threads BIGINT NOT NULL,
  fidelity_exact_matches BIGINT NOT NULL,
  fidelity_prompts BIGINT NOT NULL,
  measured_at_us BIGINT NOT NULL,
  received_at_us BIGINT NOT NULL,
  regression BIGINT NOT NULL,
  regression_reason TEXT NOT NULL
);
CREATE INDEX measurements_measured_at ON measurements (measured_at_us);
)sql"},
      {3, "rollouts and outcomes", R"sql(
CREATE TABLE rollouts (
  id {key} PRIMARY KEY,
  revision BIGINT NOT NULL,
  created_at_us BIGINT NOT NULL,
  body {blob} NOT NULL
);
CREATE TABLE outcomes (
  id {id},
  idempotency_key TEXT NOT NULL UNIQUE,
  device_id TEXT NOT NULL,
  rollout_id TEXT NOT NULL,
  outcome BIGINT NOT NULL,
  path TEXT NOT NULL,
  artifact_sha256 TEXT NOT NULL,
  policy_version TEXT NOT NULL,
  tasks_completed BIGINT NOT NULL,
  tasks_undone BIGINT NOT NULL,
  tasks_failed BIGINT NOT NULL,
  detail TEXT NOT NULL,
  observed_at_us BIGINT NOT NULL,
  received_at_us BIGINT NOT NULL
);
CREATE INDEX outcomes_rollout_device ON outcomes (rollout_id, device_id);
)sql"},
      {4, "device sightings apart from device records", R"sql(
-- Every resolve moves a device's last_seen; its record (labels, profile,
-- path, artifact, versions) rarely changes. A sighting is a short row in a
-- table with no index that involves last_seen, so bumping it rewrites one
-- small B-tree entry instead of a wide row plus two index entries; the wide
-- row is rewritten only when record_hash says the record changed.
CREATE TABLE device_sightings (
  device_id {key} PRIMARY KEY,
  hardware_class TEXT NOT NULL,
  path TEXT NOT NULL,
  last_seen_us BIGINT NOT NULL,
  record_hash BIGINT NOT NULL
){without_rowid};
-- record_hash 0 matches no record: each device's next resolve rewrites its
-- body once, without the times it used to carry.
INSERT INTO device_sightings (device_id, hardware_class, path, last_seen_us, record_hash)
  SELECT device_id, hardware_class, path, last_seen_us, 0 FROM devices;
-- Keyset pages of one hardware class, in device_id order without a sort.
CREATE INDEX device_sightings_class_id ON device_sightings (hardware_class, device_id);
DROP INDEX devices_class_path_seen;
DROP INDEX devices_class_id;
-- In devices it is now when the stored record was written.
ALTER TABLE devices RENAME COLUMN last_seen_us TO recorded_us;
)sql"},
      {5, "idempotency keys unique per device", R"sql(
-- A key identifies a report among its own device's: with keys unique over
-- the whole fleet, a device sending another device's key turned that
-- device's real report into a "duplicate" that was never stored. Every
-- existing row is kept; keys unique before are unique per device too.
CREATE TABLE measurements_v5 (
  id {id},
  idempotency_key TEXT NOT NULL,
  device_id TEXT NOT NULL,
  hardware_class TEXT NOT NULL,
  cpu_model TEXT NOT NULL,
  model TEXT NOT NULL,
  path TEXT NOT NULL,
  engine_version TEXT NOT NULL,
  decode_tok_s DOUBLE PRECISION NOT NULL,
  prefill_tok_s DOUBLE PRECISION NOT NULL,
  gemm_ms_per_step DOUBLE PRECISION NOT NULL,
  step_ms DOUBLE PRECISION NOT NULL,
  threads BIGINT NOT NULL,
  fidelity_exact_matches BIGINT NOT NULL,
  fidelity_prompts BIGINT NOT NULL,
  measured_at_us BIGINT NOT NULL,
  received_at_us BIGINT NOT NULL,
  regression BIGINT NOT NULL,
  regression_reason TEXT NOT NULL,
  UNIQUE (device_id, idempotency_key)
);
INSERT INTO measurements_v5 (id, idempotency_key, device_id, hardware_class, cpu_model, model,
    path, engine_version, decode_tok_s, prefill_tok_s, gemm_ms_per_step, step_ms, threads,
    fidelity_exact_matches, fidelity_prompts, measured_at_us, received_at_us, regression,
    regression_reason)
  SELECT id, idempotency_key, device_id, hardware_class, cpu_model, model, path, engine_version,
    decode_tok_s, prefill_tok_s, gemm_ms_per_step, step_ms, threads, fidelity_exact_matches,
    fidelity_prompts, measured_at_us, received_at_us, regression, regression_reason
  FROM measurements;
DROP TABLE measurements;
-- RENAME carries the AUTOINCREMENT counter (sqlite_sequence) along.
ALTER TABLE measurements_v5 RENAME TO measurements;
CREATE INDEX measurements_measured_at ON measurements (measured_at_us);
CREATE TABLE outcomes_v5 (
  id {id},
  idempotency_key TEXT NOT NULL,
  device_id TEXT NOT NULL,
  rollout_id TEXT NOT NULL,
  outcome BIGINT NOT NULL,
  path TEXT NOT NULL,
  artifact_sha256 TEXT NOT NULL,
  policy_version TEXT NOT NULL,
  tasks_completed BIGINT NOT NULL,
  tasks_undone BIGINT NOT NULL,
  tasks_failed BIGINT NOT NULL,
  detail TEXT NOT NULL,
  observed_at_us BIGINT NOT NULL,
  received_at_us BIGINT NOT NULL,
  UNIQUE (device_id, idempotency_key)
);
INSERT INTO outcomes_v5 (id, idempotency_key, device_id, rollout_id, outcome, path,
    artifact_sha256, policy_version, tasks_completed, tasks_undone, tasks_failed, detail,
    observed_at_us, received_at_us)
  SELECT id, idempotency_key, device_id, rollout_id, outcome, path, artifact_sha256,
    policy_version, tasks_completed, tasks_undone, tasks_failed, detail, observed_at_us,
    received_at_us
  FROM outcomes;
DROP TABLE outcomes;
ALTER TABLE outcomes_v5 RENAME TO outcomes;
CREATE INDEX outcomes_rollout_device ON outcomes (rollout_id, device_id);
)sql",
       R"sql(
-- As for SQLite above; PostgreSQL swaps the constraint in place (the
-- names are PostgreSQL's own for version 2's and 3's column constraints).
ALTER TABLE measurements DROP CONSTRAINT measurements_idempotency_key_key;
ALTER TABLE measurements ADD CONSTRAINT measurements_device_key
  UNIQUE (device_id, idempotency_key);
ALTER TABLE outcomes DROP CONSTRAINT outcomes_idempotency_key_key;
ALTER TABLE outcomes ADD CONSTRAINT outcomes_device_key UNIQUE (device_id, idempotency_key);
)sql"},
      {6, "audit trail; device versions beside each sighting", R"sql(
-- One row per mutating FleetAdmin call, refused ones included. Listed by
-- time (ListAuditEvents: since, newest first when truncated), so the index
-- is on the time with the id to order events of one microsecond.
CREATE TABLE audit_events (
  id {id},
  time_us BIGINT NOT NULL,
  identity TEXT NOT NULL,
  role TEXT NOT NULL,
  rpc TEXT NOT NULL,
  target TEXT NOT NULL,
  request_summary TEXT NOT NULL,
  result TEXT NOT NULL,
  message TEXT NOT NULL,
  replica TEXT NOT NULL
);
CREATE INDEX audit_events_time ON audit_events (time_us, id);
-- The devices-by-version gauges count the sightings seen within a window,
-- as the devices-seen gauge does: one scan of the short rows, grouped in
-- memory, never the encoded bodies. No index: one on a version would not
-- serve a count bounded by last_seen, and one with last_seen would be
-- rewritten by every resolve's bump. A body changes with either version,
-- so the columns are written wherever the body is.
ALTER TABLE device_sightings ADD COLUMN policy_version TEXT NOT NULL DEFAULT '';
ALTER TABLE device_sightings ADD COLUMN agent_version TEXT NOT NULL DEFAULT '';
-- The versions of rows written before are inside their bodies, which SQL
-- cannot read: record_hash 0 matches no record, so each device's next
-- resolve rewrites its row once with both columns (until then it counts
-- as version "").
UPDATE device_sightings SET record_hash = 0;
)sql"},
      {7, "when a device was first given its rollout", R"sql(
-- A device learns of a rollout at its first resolve the rollout shapes;
-- a member's report timeout runs from then, not from when its stage
-- opened. rollout_id mirrors the body's; rollout_since_us is the resolve
-- that first stored it, kept while it stays the same (0: unknown).
ALTER TABLE devices ADD COLUMN rollout_id TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN rollout_since_us BIGINT NOT NULL DEFAULT 0;
-- Rows written before carry their rollout in the body only: each device's
-- next resolve rewrites its row once (its rollout_since is then that
-- resolve, later than the truth, so a timeout never starts early).
UPDATE device_sightings SET record_hash = 0;
)sql"},
      {8, "each device's last hardware profile as it sent it", R"sql(
-- The HardwareProfile wire bytes of the device's last resolve (at most
-- 16 KiB), so that an explanation evaluates what the device sent; NULL for
-- a device not seen since. Written with the record, whose fingerprint
-- covers the profile less its free RAM, so an unchanged device still only
-- has its sighting bumped. Rows from before get theirs at their next
-- resolve: the fingerprint with a profile differs from the one stored.
ALTER TABLE devices ADD COLUMN profile {blob};
ALTER TABLE devices ADD COLUMN profile_recorded_us BIGINT NOT NULL DEFAULT 0;
)sql"},
      {9, "what each device runs beside what it is assigned", R"sql(
-- The build a device last said it runs (ReportOutcomeRequest.running), one
-- row a device, written by its reports, never by resolves. build_key is
-- path, model and artifact digest joined ('' when nothing runs), compared
-- with devices.assigned_key to find drift without decoding bodies;
-- since_us is the first report of this build_key, kept while it stays.
CREATE TABLE device_running (
  device_id {key} PRIMARY KEY,
  build_key TEXT NOT NULL,
  path TEXT NOT NULL,
  source BIGINT NOT NULL,
  outcome BIGINT NOT NULL,
  observed_at_us BIGINT NOT NULL,
  received_at_us BIGINT NOT NULL,
  since_us BIGINT NOT NULL,
  body {blob} NOT NULL
);
-- The assigned build the same way, and when the device was first given it
-- (the resolve that first stored it, kept while it stays, as
-- rollout_since_us). '' in rows from before: those are not judged until
-- each device's next resolve rewrites its row.
ALTER TABLE devices ADD COLUMN assigned_key TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN assigned_since_us BIGINT NOT NULL DEFAULT 0;
UPDATE device_sightings SET record_hash = 0;
)sql"},
  };
  return migrations;
}

std::string ForDialect(const char* sql, SqlDialect dialect) {
  if (dialect == SqlDialect::kSqlite) {
    return absl::StrReplaceAll(sql, {{"{id}", "INTEGER PRIMARY KEY AUTOINCREMENT"},
                                     {"{blob}", "BLOB"},
                                     {"{key}", "TEXT"},
                                     {"{without_rowid}", " WITHOUT ROWID"}});
  }
  // Byte order for keys, so keyset pagination orders ids the same way on
  // both backends whatever locale the cluster was created with.
  return absl::StrReplaceAll(sql, {{"{id}", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"},
                                   {"{blob}", "BYTEA"},
                                   {"{key}", "TEXT COLLATE \"C\""},
                                   {"{without_rowid}", ""}});
}

}  // namespace

int LatestSchemaVersion() { return Migrations().back().version; }

absl::StatusOr<int> ApplyMigrations(SqlDatabase& database) {
  return ApplyMigrations(database, LatestSchemaVersion());
}

absl::StatusOr<int> ApplyMigrations(SqlDatabase& database, int target_version) {
  ASSIGN_OR_RETURN(std::unique_ptr<SqlSession> session, database.Acquire());
  RETURN_IF_ERROR(session->Begin(/*for_write=*/true));
  const std::string lock = database.MigrationLockSql();
  if (!lock.empty()) RETURN_IF_ERROR(session->Query(lock).status());
  RETURN_IF_ERROR(session->ExecScript(
      "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL, "
      "applied_at_us BIGINT NOT NULL, description TEXT NOT NULL)"));
  ASSIGN_OR_RETURN(SqlRows rows, session->Query("SELECT MAX(version) FROM schema_version"));
  int64_t current = 0;
  if (!rows.empty() && rows[0][0].has_value()) {
    ASSIGN_OR_RETURN(current, CellInt(rows[0][0], "schema_version.version"));
  }
  if (current > LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "store schema version ", current, " is newer than this binary knows (",
        LatestSchemaVersion(), "); run a weightpath-server at least as new as the one that "
                               "migrated it"));
  }
  for (const Migration& migration : Migrations()) {
    if (migration.version <= current || migration.version > target_version) continue;
    const char* sql = database.dialect() == SqlDialect::kPostgres && migration.postgres_sql != nullptr
                          ? migration.postgres_sql
                          : migration.sql;
    RETURN_IF_ERROR(session->ExecScript(ForDialect(sql, database.dialect())));
    RETURN_IF_ERROR(session
                        ->Query("INSERT INTO schema_version (version, applied_at_us, description) "
                                "VALUES ($1, $2, $3)",
                                {int64_t{migration.version}, absl::ToUnixMicros(absl::Now()),
                                 std::string(migration.description)})
                        .status());
  }
  RETURN_IF_ERROR(session->Commit());
  return static_cast<int>(std::max<int64_t>(current, std::min(target_version, LatestSchemaVersion())));
}

}  // namespace weightpath::store
