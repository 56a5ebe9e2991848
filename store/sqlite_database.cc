// SQLite behind SqlDatabase: one read-write connection per store, guarded by
// a mutex (SQLite admits one writer at a time anyway, so a pool would only
// add SQLITE_BUSY retries without adding throughput), and one read-only
// connection, with its own mutex, for the reads: in WAL mode a reader sees the
// last commit without waiting for the writer, so operators' listings and
// devices' reports do not queue behind each other.
#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "store/call_deadline.h"
#include "store/sql_database.h"

namespace weightpath::store {
namespace {

// Each wait for a lock another connection holds; a call's deadline
// shortens it (store/call_deadline.h).
constexpr absl::Duration kBusyTimeout = absl::Seconds(10);

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  std::string message = absl::StrCat("sqlite ", what, ": ", sqlite3_errstr(rc));
  if (db != nullptr) absl::StrAppend(&message, " (", sqlite3_errmsg(db), ")");
  if ((rc & 0xff) == SQLITE_BUSY && db != nullptr) {
    // Said plainly, with the file, since an operator has to find who holds it.
    const char* file = sqlite3_db_filename(db, "main");
    message = absl::StrCat("sqlite store ", file != nullptr ? file : "",
                           ": locked by another connection; gave up waiting (", message, ")");
  }
  if (((rc & 0xff) == SQLITE_FULL || (rc & 0xff) == SQLITE_IOERR) && db != nullptr) {
    // A full volume or a file size limit: said with the file and the
    // failing operation (SQLite's own words are "database or disk is full",
    // or "disk I/O error" for EFBIG), since the fix is on that volume.
    const char* file = sqlite3_db_filename(db, "main");
    const int extended = sqlite3_extended_errcode(db);
    std::string cause = "I/O error";
    if ((rc & 0xff) == SQLITE_FULL) {
      cause = "no space left on its volume";
    } else if (extended == SQLITE_IOERR_WRITE || extended == SQLITE_IOERR_SHMSIZE ||
               extended == SQLITE_IOERR_TRUNCATE || extended == SQLITE_IOERR_FSYNC) {
      cause = "a write failed (its volume full, or the process's file size limit reached)";
    }
    // The system error, where SQLite kept it (not for every failure).
    const int system_error = sqlite3_system_errno(db);
    if (system_error == EFBIG) {
      cause = "a file would pass the process's file size limit (RLIMIT_FSIZE)";
    } else if (system_error == ENOSPC || system_error == EDQUOT) {
      cause = absl::StrCat("no space left on its volume (", std::strerror(system_error), ")");
    }
    message = absl::StrCat("sqlite store ", file != nullptr ? file : "", ": cannot write: ", cause,
                           "; writes are refused until that is mended (", message, ")");
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_FULL:
      return absl::UnavailableError(message);
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(message);
    default:
      return absl::InternalError(message);
  }
}

// $1 -> ?1: SQLite's numbered parameters bind by the same index.
std::string ToSqlitePlaceholders(std::string_view sql) {
  std::string out(sql);
  for (char& c : out) {
    if (c == '$') c = '?';
  }
  return out;
}

struct Connection {
  sqlite3* db = nullptr;
  std::map<std::string, sqlite3_stmt*, std::less<>> statements;

  ~Connection() {
    for (auto& [sql, statement] : statements) sqlite3_finalize(statement);
    if (db != nullptr) sqlite3_close(db);
  }
};

class SqliteSession : public SqlSession {
 public:
  SqliteSession(Connection* connection, std::unique_lock<std::timed_mutex> lock)
      : connection_(connection), lock_(std::move(lock)) {}
  ~SqliteSession() override {
    if (in_transaction_) (void)Rollback();
  }

  absl::Status Begin(bool for_write) override {
    absl::Status status = ExecScript(for_write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED");
    if (!status.ok()) return status;
    in_transaction_ = true;
    return absl::OkStatus();
  }
  absl::Status Commit() override {
    absl::Status status = ExecScript("COMMIT");
    if (!status.ok()) {
      (void)ExecScript("ROLLBACK");
    }
    in_transaction_ = false;
    return status;
  }
  absl::Status Rollback() override {
    in_transaction_ = false;
    return ExecScript("ROLLBACK");
  }
  bool in_transaction() const override { return in_transaction_; }

  absl::Status ExecScript(std::string_view sql) override {
    char* error = nullptr;
    const std::string text(sql);
    int rc = sqlite3_exec(connection_->db, text.c_str(), nullptr, nullptr, &error);
    if (rc != SQLITE_OK) {
      absl::Status status = SqliteError(connection_->db, rc, "exec");
      sqlite3_free(error);
      return status;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<SqlRows> Query(std::string_view sql,
                                const std::vector<SqlValue>& params) override {
    sqlite3_stmt* statement = nullptr;
    auto cached = connection_->statements.find(sql);
    if (cached != connection_->statements.end()) {
      statement = cached->second;
    } else {
      const std::string text = ToSqlitePlaceholders(sql);
      int rc = sqlite3_prepare_v3(connection_->db, text.c_str(), static_cast<int>(text.size()),
                                  SQLITE_PREPARE_PERSISTENT, &statement, nullptr);
      if (rc != SQLITE_OK) return SqliteError(connection_->db, rc, "prepare");
      connection_->statements.emplace(std::string(sql), statement);
    }
    sqlite3_reset(statement);
    sqlite3_clear_bindings(statement);
    for (size_t i = 0; i < params.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      const SqlValue& value = params[i];
      int rc = SQLITE_OK;
      if (std::holds_alternative<std::nullptr_t>(value)) {
        rc = sqlite3_bind_null(statement, index);
      } else if (const auto* integer = std::get_if<int64_t>(&value)) {
        rc = sqlite3_bind_int64(statement, index, *integer);
      } else if (const auto* real = std::get_if<double>(&value)) {
        rc = sqlite3_bind_double(statement, index, *real);
      } else if (const auto* text = std::get_if<std::string>(&value)) {
        rc = sqlite3_bind_text(statement, index, text->data(), static_cast<int>(text->size()),
                               SQLITE_TRANSIENT);
      } else {
        const std::string& bytes = std::get<SqlBlob>(value).bytes;
        rc = sqlite3_bind_blob(statement, index, bytes.data(), static_cast<int>(bytes.size()),
                               SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) return SqliteError(connection_->db, rc, "bind");
    }
    SqlRows rows;
    while (true) {
      int rc = sqlite3_step(statement);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        absl::Status status = SqliteError(connection_->db, rc, "step");
        sqlite3_reset(statement);
        return status;
      }
      const int columns = sqlite3_column_count(statement);
      SqlRow row;
      row.reserve(columns);
      for (int column = 0; column < columns; ++column) {
        switch (sqlite3_column_type(statement, column)) {
          case SQLITE_NULL:
            row.emplace_back(std::nullopt);
            break;
          case SQLITE_INTEGER:
            row.emplace_back(absl::StrCat(sqlite3_column_int64(statement, column)));
            break;
          case SQLITE_FLOAT:
            row.emplace_back(absl::StrFormat("%.17g", sqlite3_column_double(statement, column)));
            break;
          default: {
            const void* data = sqlite3_column_blob(statement, column);
            const int size = sqlite3_column_bytes(statement, column);
            row.emplace_back(std::string(static_cast<const char*>(data), size));
          }
        }
      }
      rows.push_back(std::move(row));
    }
    sqlite3_reset(statement);
    return rows;
  }

 private:
  Connection* connection_;
  std::unique_lock<std::timed_mutex> lock_;
  bool in_transaction_ = false;
};

absl::StatusOr<std::unique_ptr<Connection>> OpenConnection(const std::string& file, int flags) {
  auto connection = std::make_unique<Connection>();
  const int rc = sqlite3_open_v2(file.c_str(), &connection->db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    return absl::UnavailableError(absl::StrCat("store URL sqlite:", file, ": cannot open",
                                               (flags & SQLITE_OPEN_READONLY) ? " for reading" : "",
                                               ": ", sqlite3_errstr(rc)));
  }
  // Another process (a restarted server, a CLI) may hold the write lock for a
  // moment; wait for it rather than failing the request. Each Acquire sets
  // it again, bounded by the call's deadline.
  sqlite3_busy_timeout(connection->db, static_cast<int>(absl::ToInt64Milliseconds(kBusyTimeout)));
  return connection;
}

class SqliteDatabase : public SqlDatabase {
 public:
  SqliteDatabase(std::string file, std::unique_ptr<Connection> connection)
      : file_(std::move(file)), writer_(std::move(connection)) {}
  SqlDialect dialect() const override { return SqlDialect::kSqlite; }
  std::string MigrationLockSql() const override { return ""; }
  absl::StatusOr<std::unique_ptr<SqlSession>> Acquire() override {
    return Take(writer_mutex_, writer_.get(), "its connection stayed busy with other work "
                                              "(another write waiting for the lock?)");
  }
  absl::StatusOr<std::unique_ptr<SqlSession>> AcquireForRead() override {
    {
      // Opened on first use, after the migrations the write connection ran:
      // a read-only connection could not create the WAL files of a new store.
      std::lock_guard lock(reader_open_mutex_);
      if (reader_ == nullptr) {
        absl::StatusOr<std::unique_ptr<Connection>> reader = OpenConnection(file_, SQLITE_OPEN_READONLY);
        if (!reader.ok()) return reader.status();
        char* error = nullptr;
        if (sqlite3_exec((*reader)->db, "PRAGMA cache_size=-65536;", nullptr, nullptr, &error) !=
            SQLITE_OK) {
          sqlite3_free(error);  // only the cache's size: the reads work without it
        }
        reader_ = *std::move(reader);
      }
    }
    return Take(reader_mutex_, reader_.get(),
                "its read connection stayed busy with other reads");
  }

 private:
  absl::StatusOr<std::unique_ptr<SqlSession>> Take(std::timed_mutex& mutex, Connection* connection,
                                                   absl::string_view busy_with) {
    const absl::Time deadline = CallDeadline();
    std::unique_lock lock(mutex, std::defer_lock);
    if (deadline == absl::InfiniteFuture()) {
      lock.lock();
    } else if (!lock.try_lock_until(absl::ToChronoTime(deadline))) {
      return absl::UnavailableError(
          absl::StrCat("sqlite store ", file_, ": ", busy_with, " until the call's deadline"));
    }
    // The connection is this session's now; so is its busy timeout.
    const absl::Duration wait = std::clamp(deadline - absl::Now(), absl::ZeroDuration(), kBusyTimeout);
    sqlite3_busy_timeout(connection->db, static_cast<int>(absl::ToInt64Milliseconds(wait)));
    return std::make_unique<SqliteSession>(connection, std::move(lock));
  }

  const std::string file_;
  std::timed_mutex writer_mutex_;
  std::unique_ptr<Connection> writer_;
  std::mutex reader_open_mutex_;
  std::timed_mutex reader_mutex_;
  std::unique_ptr<Connection> reader_;  // set once, by the first AcquireForRead
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenSqliteDatabase(const std::string& file) {
  absl::StatusOr<std::unique_ptr<Connection>> opened =
      OpenConnection(file, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<Connection> connection = *std::move(opened);
  int rc = SQLITE_OK;
  // WAL lets readers proceed during writes. synchronous=FULL fsyncs the WAL at
  // every commit: an acknowledged measurement must survive a power cut, not
  // only a process crash (NORMAL guarantees only the latter in WAL mode).
  // A 64 MiB page cache (default 2 MiB) keeps a million-device registry's
  // indexes in memory, so upserts and the summary do not re-read the disk.
  // The read connection can keep a snapshot open while the writer commits,
  // and a checkpoint cannot reset the WAL meanwhile: journal_size_limit
  // truncates it back to 64 MiB once one can, instead of leaving it at the
  // largest it ever grew to.
  char* error = nullptr;
  rc = sqlite3_exec(connection->db,
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; "
                    "PRAGMA cache_size=-65536; PRAGMA journal_size_limit=67108864;",
                    nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error != nullptr ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    return absl::UnavailableError(
        absl::StrCat("store URL sqlite:", file, ": cannot configure: ", message));
  }
  return std::make_unique<SqliteDatabase>(file, std::move(connection));
}

}  // namespace weightpath::store
