// Fresh, empty databases for both backends, so one suite runs unchanged
// against SQLite and PostgreSQL.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weightpath/v1/fleet.pb.h"

namespace weightpath::store::testing {

enum class Backend { kSqlite, kPostgres };

std::string BackendName(Backend backend);

// A URL no other test uses: a new file in this binary's temp directory, or a
// new database on the shared test PostgreSQL (see SharedPostgres for
// `sync_to_disk`).
absl::StatusOr<std::string> FreshDatabaseUrl(Backend backend, bool sync_to_disk = false);

// A registry record as the server would build it after a resolve.
v1::Device MakeDevice(const std::string& device_id, const std::string& hardware_class,
                      const std::string& path, const std::string& cpu_model, absl::Time seen);

// One audit event as a row of the table, for tests that need a trail larger
// than calls could make in seconds.
struct AuditRow {
  absl::Time time;
  std::string target;
  std::string request_summary;
  std::string message;
  std::string identity = "vera";
  std::string role = "viewer";
  std::string rpc = "PauseRollout";
  std::string result = "PERMISSION_DENIED";
};

// Opens the store at `url` (so its schema exists) and writes `rows` into its
// audit table in one transaction: thousands of commits, each synced, would
// take seconds.
absl::Status InsertAuditRows(const std::string& url, const std::vector<AuditRow>& rows);

}  // namespace weightpath::store::testing
