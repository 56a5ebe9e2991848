// Versioned schema migrations, applied in order at open inside one
// transaction, each recorded in schema_version.
#pragma once

#include "absl/status/statusor.h"
#include "store/sql_database.h"

namespace weightpath::store {

int LatestSchemaVersion();

// Brings the database to `target_version` (LatestSchemaVersion() unless a
// test builds an older database to upgrade) and returns the version it is
// at. FAILED_PRECONDITION (naming both versions) when the database is newer
// than this binary.
absl::StatusOr<int> ApplyMigrations(SqlDatabase& database, int target_version);
absl::StatusOr<int> ApplyMigrations(SqlDatabase& database);

}  // namespace weightpath::store
