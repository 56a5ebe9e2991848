// Versioned schema migrations, applied in order at open inside one
// transaction, each recorded in schema_version.
#pragma once

#include "absl/status/statusor.h"
#include "store/sql_database.h"

namespace weightpath::store {

int LatestSchemaVersion();

// Brings the database to LatestSchemaVersion() and returns it.
// FAILED_PRECONDITION (naming both versions) when the database is newer.
absl::StatusOr<int> ApplyMigrations(SqlDatabase& database);

}  // namespace weightpath::store
