#include "store/device_upsert.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace weightpath::store {
namespace {

// Rows per statement: one round trip per chunk instead of per device.
constexpr size_t kRowsPerStatement = 100;

struct StoredSighting {
  int64_t record_hash;
  int64_t last_seen_us;
};

// "($1, $2, $3), ($4, $5, $6)" for `rows` rows of `columns` values.
std::string Placeholders(size_t rows, size_t columns) {
  std::string out;
  size_t next = 1;
  for (size_t r = 0; r < rows; ++r) {
    absl::StrAppend(&out, r == 0 ? "(" : ", (");
    for (size_t c = 0; c < columns; ++c) absl::StrAppend(&out, c == 0 ? "$" : ", $", next++);
    out += ')';
  }
  return out;
}

absl::Status ValidateBatch(const std::vector<EncodedDevice>& batch) {
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].device_id.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("devices[", i, "].device_id is required"));
    }
    if (batch[i].last_seen_us == 0) {
      return absl::InvalidArgumentError(absl::StrCat("devices[", i, "].last_seen is required"));
    }
    if (batch[i].profile.size() > kMaxStoredProfileBytes) {
      return absl::InvalidArgumentError(absl::StrCat("devices[", i, "].profile is ",
                                                     batch[i].profile.size(), " bytes; at most ",
                                                     kMaxStoredProfileBytes, " are kept"));
    }
  }
  return absl::OkStatus();
}

// The newest record of each device, in device_id order: neighbouring ids
// share B-tree pages, and PostgreSQL replicas lock the rows in one order.
std::vector<const EncodedDevice*> NewestPerDevice(const std::vector<EncodedDevice>& batch) {
  std::unordered_map<std::string_view, size_t> newest;
  newest.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    auto [it, inserted] = newest.emplace(batch[i].device_id, i);
    if (!inserted && batch[i].last_seen_us >= batch[it->second].last_seen_us) it->second = i;
  }
  std::vector<const EncodedDevice*> pending;
  pending.reserve(newest.size());
  for (const auto& [id, index] : newest) pending.push_back(&batch[index]);
  std::sort(pending.begin(), pending.end(), [](const EncodedDevice* a, const EncodedDevice* b) {
    return a->device_id < b->device_id;
  });
  return pending;
}

absl::StatusOr<std::unordered_map<std::string, StoredSighting>> ReadSightings(
    SqlSession& session, SqlDialect dialect, const std::vector<const EncodedDevice*>& pending) {
  std::unordered_map<std::string, StoredSighting> stored;
  for (size_t offset = 0; offset < pending.size(); offset += kRowsPerStatement) {
    const size_t rows = std::min(kRowsPerStatement, pending.size() - offset);
    std::string sql =
        "SELECT device_id, record_hash, last_seen_us FROM device_sightings WHERE device_id IN (";
    std::vector<SqlValue> params;
    params.reserve(rows);
    for (size_t r = 0; r < rows; ++r) {
      params.emplace_back(pending[offset + r]->device_id);
      absl::StrAppend(&sql, r == 0 ? "$" : ", $", r + 1);
    }
    sql += ") ORDER BY device_id";
    // Two replicas flushing the same device serialize on its row, so the
    // fingerprint compared here is still the stored one when they write.
    if (dialect == SqlDialect::kPostgres) sql += " FOR UPDATE";
    ASSIGN_OR_RETURN(SqlRows found, session.Query(sql, params));
    for (const SqlRow& row : found) {
      StoredSighting sighting;
      ASSIGN_OR_RETURN(sighting.record_hash, CellInt(row[1], "device_sightings.record_hash"));
      ASSIGN_OR_RETURN(sighting.last_seen_us, CellInt(row[2], "device_sightings.last_seen_us"));
      stored.emplace(CellText(row[0]), sighting);
    }
  }
  return stored;
}

// The common case in one statement: a device seen again with the record the
// store already holds only has its last_seen moved. The row's fingerprint is
// compared in the UPDATE itself, so a concurrent writer cannot slip a
// different record in between. Returns the devices it moved.
absl::StatusOr<std::unordered_set<std::string>> BumpUnchangedSightings(
    SqlSession& session, const std::vector<const EncodedDevice*>& pending) {
  std::unordered_set<std::string> bumped;
  bumped.reserve(pending.size());
  for (size_t offset = 0; offset < pending.size(); offset += kRowsPerStatement) {
    const size_t rows = std::min(kRowsPerStatement, pending.size() - offset);
    std::string sql = "UPDATE device_sightings AS s SET last_seen_us = v.column2 FROM (VALUES ";
    std::vector<SqlValue> params;
    params.reserve(rows * 3);
    for (size_t r = 0; r < rows; ++r) {
      const EncodedDevice& device = *pending[offset + r];
      const size_t p = params.size();
      // Typed, since PostgreSQL cannot infer a VALUES column's type from use.
      absl::StrAppend(&sql, r == 0 ? "" : ", ", "($", p + 1, ", CAST($", p + 2, " AS BIGINT), CAST($",
                      p + 3, " AS BIGINT))");
      params.emplace_back(device.device_id);
      params.emplace_back(device.last_seen_us);
      params.emplace_back(device.fingerprint);
    }
    sql +=
        ") AS v WHERE s.device_id = v.column1 AND s.record_hash = v.column3 AND "
        "s.last_seen_us < v.column2 RETURNING device_id";
    ASSIGN_OR_RETURN(SqlRows moved, session.Query(sql, params));
    for (SqlRow& row : moved) bumped.insert(CellText(row[0]));
  }
  return bumped;
}

// Whole records: the wide devices row and the sighting with its fingerprint.
absl::Status WriteChangedRecords(SqlSession& session, const std::vector<const EncodedDevice*>& changed) {
  for (size_t offset = 0; offset < changed.size(); offset += kRowsPerStatement) {
    const size_t rows = std::min(kRowsPerStatement, changed.size() - offset);
    std::vector<SqlValue> record_params;
    std::vector<SqlValue> sighting_params;
    record_params.reserve(rows * 13);
    sighting_params.reserve(rows * 7);
    for (size_t r = 0; r < rows; ++r) {
      const EncodedDevice& device = *changed[offset + r];
      record_params.emplace_back(device.device_id);
      record_params.emplace_back(device.hardware_class);
      record_params.emplace_back(device.path);
      record_params.emplace_back(device.cpu_model);
      record_params.emplace_back(device.first_seen_us != 0 ? device.first_seen_us : device.last_seen_us);
      record_params.emplace_back(device.last_seen_us);
      record_params.emplace_back(SqlBlob{device.body});
      record_params.emplace_back(device.rollout_id);
      record_params.emplace_back(device.last_seen_us);
      // NULL: this record carries no profile, and the stored one stays.
      if (device.profile.empty()) {
        record_params.emplace_back(nullptr);
      } else {
        record_params.emplace_back(SqlBlob{device.profile});
      }
      record_params.emplace_back(device.last_seen_us);
      record_params.emplace_back(device.assigned_key);
      record_params.emplace_back(device.last_seen_us);
      sighting_params.emplace_back(device.device_id);
      sighting_params.emplace_back(device.hardware_class);
      sighting_params.emplace_back(device.path);
      sighting_params.emplace_back(device.last_seen_us);
      sighting_params.emplace_back(device.fingerprint);
      sighting_params.emplace_back(device.policy_version);
      sighting_params.emplace_back(device.agent_version);
    }
    RETURN_IF_ERROR(
        session
            // rollout_since_us moves only when the rollout does: it is the
            // first resolve that gave the device its current rollout_id;
            // assigned_since_us likewise for its assigned build.
            .Query(absl::StrCat("INSERT INTO devices (device_id, hardware_class, path, cpu_model, "
                                "first_seen_us, recorded_us, body, rollout_id, rollout_since_us, "
                                "profile, profile_recorded_us, assigned_key, assigned_since_us) "
                                "VALUES ",
                                Placeholders(rows, 13),
                                " ON CONFLICT (device_id) DO UPDATE SET hardware_class = "
                                "excluded.hardware_class, path = excluded.path, cpu_model = "
                                "excluded.cpu_model, recorded_us = excluded.recorded_us, body = "
                                "excluded.body, rollout_since_us = CASE WHEN devices.rollout_id = "
                                "excluded.rollout_id AND devices.rollout_since_us <> 0 THEN "
                                "devices.rollout_since_us ELSE excluded.rollout_since_us END, "
                                "rollout_id = excluded.rollout_id, profile = CASE WHEN "
                                "excluded.profile IS NULL THEN devices.profile ELSE "
                                "excluded.profile END, profile_recorded_us = CASE WHEN "
                                "excluded.profile IS NULL THEN devices.profile_recorded_us ELSE "
                                "excluded.profile_recorded_us END, assigned_since_us = CASE WHEN "
                                "devices.assigned_key = excluded.assigned_key AND "
                                "devices.assigned_since_us <> 0 THEN devices.assigned_since_us "
                                "ELSE excluded.assigned_since_us END, assigned_key = "
                                "excluded.assigned_key WHERE excluded.recorded_us >= "
                                "devices.recorded_us"),
                   record_params)
            .status());
    RETURN_IF_ERROR(
        session
            .Query(absl::StrCat("INSERT INTO device_sightings (device_id, hardware_class, path, "
                                "last_seen_us, record_hash, policy_version, agent_version) "
                                "VALUES ",
                                Placeholders(rows, 7),
                                " ON CONFLICT (device_id) DO UPDATE SET hardware_class = "
                                "excluded.hardware_class, path = excluded.path, last_seen_us = "
                                "excluded.last_seen_us, record_hash = excluded.record_hash, "
                                "policy_version = excluded.policy_version, agent_version = "
                                "excluded.agent_version WHERE "
                                "excluded.last_seen_us >= device_sightings.last_seen_us"),
                   sighting_params)
            .status());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status UpsertDeviceBatch(SqlSession& session, SqlDialect dialect,
                               const std::vector<EncodedDevice>& batch) {
  RETURN_IF_ERROR(ValidateBatch(batch));
  if (batch.empty()) return absl::OkStatus();
  const std::vector<const EncodedDevice*> pending = NewestPerDevice(batch);

  RETURN_IF_ERROR(session.Begin(/*for_write=*/true));
  ASSIGN_OR_RETURN(const std::unordered_set<std::string> bumped, BumpUnchangedSightings(session, pending));
  std::vector<const EncodedDevice*> rest;
  for (const EncodedDevice* device : pending) {
    if (bumped.count(device->device_id) == 0) rest.push_back(device);
  }
  // New devices, changed records, and records no newer than the store's.
  ASSIGN_OR_RETURN(auto stored, ReadSightings(session, dialect, rest));
  std::vector<const EncodedDevice*> changed;
  for (const EncodedDevice* device : rest) {
    auto it = stored.find(device->device_id);
    if (it == stored.end()) {
      changed.push_back(device);
    } else if (device->last_seen_us < it->second.last_seen_us) {
      // Older than what the store knows: it would undo a newer record.
      continue;
    } else if (device->fingerprint != it->second.record_hash ||
               device->last_seen_us > it->second.last_seen_us) {
      // The second case only when another replica rewrote the row between
      // the two statements; writing the whole record is correct either way.
      changed.push_back(device);
    }
    // else: the same record, already stored with this last_seen.
  }
  RETURN_IF_ERROR(WriteChangedRecords(session, changed));
  return session.Commit();
}

}  // namespace weightpath::store
