// The little SQL both backends share: parameters in, rows of bytes out, inside
// explicit transactions. The fleet store is written once against this; only
// the connection handling differs between SQLite and PostgreSQL.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weightpath::store {

// Bytes that must travel as a binary value (serialized protos).
struct SqlBlob {
  std::string bytes;
};

using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string, SqlBlob>;

// One result cell: absent for NULL; integers and reals as decimal text that
// round-trips exactly; blobs as their raw bytes.
using SqlCell = std::optional<std::string>;
using SqlRow = std::vector<SqlCell>;
using SqlRows = std::vector<SqlRow>;

enum class SqlDialect { kSqlite, kPostgres };

// A connection held for one unit of work. Statements are written with
// PostgreSQL's $1..$n placeholders; the SQLite session translates them.
class SqlSession {
 public:
  virtual ~SqlSession() = default;
  // `for_write` takes the write lock up front on SQLite (BEGIN IMMEDIATE) so
  // two processes never deadlock upgrading a read lock.
  virtual absl::Status Begin(bool for_write) = 0;
  virtual absl::Status Commit() = 0;
  virtual absl::Status Rollback() = 0;
  virtual absl::StatusOr<SqlRows> Query(std::string_view sql,
                                        const std::vector<SqlValue>& params = {}) = 0;
  // Several statements without parameters (migrations).
  virtual absl::Status ExecScript(std::string_view sql) = 0;
  virtual bool in_transaction() const = 0;
};

class SqlDatabase {
 public:
  virtual ~SqlDatabase() = default;
  virtual SqlDialect dialect() const = 0;
  // Blocks while every pooled connection is busy.
  virtual absl::StatusOr<std::unique_ptr<SqlSession>> Acquire() = 0;
  // A session for statements that only read. SQLite gives it a read-only
  // connection of its own: in WAL mode a reader neither waits for the writer
  // nor holds it up, so an operator's long listing cannot delay a device's
  // report behind the one write connection. PostgreSQL takes it from the pool.
  virtual absl::StatusOr<std::unique_ptr<SqlSession>> AcquireForRead() { return Acquire(); }
  // What a transaction runs first so concurrent openers apply migrations one
  // at a time ("" when Begin(true) already serializes them).
  virtual std::string MigrationLockSql() const = 0;
};

// "sqlite:FILE" or "postgres://..." / "postgresql://...".
absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenSqlDatabase(std::string_view url);

absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenSqliteDatabase(const std::string& file);
absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenPostgresDatabase(const std::string& url,
                                                                  int pool_size);

// Parsing helpers for SqlCell values.
absl::StatusOr<int64_t> CellInt(const SqlCell& cell, absl::string_view column);
absl::StatusOr<double> CellDouble(const SqlCell& cell, absl::string_view column);
std::string CellText(const SqlCell& cell);

}  // namespace weightpath::store
