// PostgreSQL behind SqlDatabase: a small pool of libpq connections. Each
// session owns one connection exclusively until it is released, because a
// libpq connection carries transaction state and is not thread-safe.
#include <libpq-fe.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "store/call_deadline.h"
#include "store/sql_database.h"
#include "store/store_url_text.h"

namespace weightpath::store {
namespace {

constexpr Oid kByteaOid = 17;

absl::Status ResultError(PGconn* connection, PGresult* result, absl::string_view what) {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = absl::StrCat("postgres ", what, ": ", PQerrorMessage(connection));
  if (PQstatus(connection) != CONNECTION_OK) return absl::UnavailableError(message);
  const std::string sqlstate = state != nullptr ? state : "";
  if (sqlstate == "23505") return absl::AlreadyExistsError(message);
  if (sqlstate == "40001" || sqlstate == "40P01") return absl::AbortedError(message);
  // lock_not_available: lock_timeout (the call's deadline) ran out first.
  if (sqlstate == "55P03") {
    return absl::UnavailableError(absl::StrCat(
        "postgres store: a lock held by another transaction was not released before the "
        "call's deadline (", message, ")"));
  }
  // Class 08 (connection exception), 57P (operator intervention: shutdown).
  if (sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

class PostgresDatabase;

class PostgresSession : public SqlSession {
 public:
  PostgresSession(PostgresDatabase* database, PGconn* connection)
      : database_(database), connection_(connection) {}
  ~PostgresSession() override;

  absl::Status Begin(bool /*for_write*/) override {
    absl::Status status = ExecScript("BEGIN");
    if (!status.ok()) return status;
    in_transaction_ = true;
    const absl::Time deadline = CallDeadline();
    if (deadline == absl::InfiniteFuture()) return absl::OkStatus();
    // Waits for another transaction's locks end by the call's deadline
    // (0 would mean no limit, hence at least 1 ms).
    const int64_t wait_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()));
    status = ExecScript(absl::StrCat("SET LOCAL lock_timeout = ", wait_ms));
    if (!status.ok()) (void)Rollback();
    return status;
  }
  absl::Status Commit() override {
    in_transaction_ = false;
    return ExecScript("COMMIT");
  }
  absl::Status Rollback() override {
    in_transaction_ = false;
    return ExecScript("ROLLBACK");
  }
  bool in_transaction() const override { return in_transaction_; }

  absl::Status ExecScript(std::string_view sql) override {
    const std::string text(sql);
    PGresult* result = PQexec(connection_, text.c_str());
    const ExecStatusType code = PQresultStatus(result);
    absl::Status status = absl::OkStatus();
    if (code != PGRES_COMMAND_OK && code != PGRES_TUPLES_OK) {
      status = ResultError(connection_, result, "exec");
    }
    PQclear(result);
    return status;
  }

  absl::StatusOr<SqlRows> Query(std::string_view sql,
                                const std::vector<SqlValue>& params) override {
    std::vector<std::string> texts(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    std::vector<int> lengths(params.size(), 0);
    std::vector<int> formats(params.size(), 0);
    for (size_t i = 0; i < params.size(); ++i) {
      const SqlValue& value = params[i];
      if (std::holds_alternative<std::nullptr_t>(value)) continue;
      if (const auto* integer = std::get_if<int64_t>(&value)) {
        texts[i] = absl::StrCat(*integer);
      } else if (const auto* real = std::get_if<double>(&value)) {
        texts[i] = absl::StrFormat("%.17g", *real);
      } else if (const auto* text = std::get_if<std::string>(&value)) {
        texts[i] = *text;
      } else {
        texts[i] = std::get<SqlBlob>(value).bytes;
        formats[i] = 1;  // binary: bytea without escaping
      }
      values[i] = texts[i].data();
      lengths[i] = static_cast<int>(texts[i].size());
    }
    const std::string text(sql);
    PGresult* result =
        PQexecParams(connection_, text.c_str(), static_cast<int>(params.size()), nullptr,
                     values.data(), lengths.data(), formats.data(), /*resultFormat=*/0);
    const ExecStatusType code = PQresultStatus(result);
    if (code != PGRES_COMMAND_OK && code != PGRES_TUPLES_OK) {
      absl::Status status = ResultError(connection_, result, "query");
      PQclear(result);
      return status;
    }
    SqlRows rows;
    const int row_count = PQntuples(result);
    const int column_count = PQnfields(result);
    rows.reserve(row_count);
    for (int r = 0; r < row_count; ++r) {
      SqlRow row;
      row.reserve(column_count);
      for (int c = 0; c < column_count; ++c) {
        if (PQgetisnull(result, r, c)) {
          row.emplace_back(std::nullopt);
        } else if (PQftype(result, c) == kByteaOid) {
          size_t size = 0;
          unsigned char* bytes = PQunescapeBytea(
              reinterpret_cast<const unsigned char*>(PQgetvalue(result, r, c)), &size);
          row.emplace_back(std::string(reinterpret_cast<char*>(bytes), size));
          PQfreemem(bytes);
        } else {
          row.emplace_back(std::string(PQgetvalue(result, r, c), PQgetlength(result, r, c)));
        }
      }
      rows.push_back(std::move(row));
    }
    PQclear(result);
    return rows;
  }

 private:
  PostgresDatabase* database_;
  PGconn* connection_;
  bool in_transaction_ = false;
};

void IgnoreNotice(void*, const char*) {}

class PostgresDatabase : public SqlDatabase {
 public:
  PostgresDatabase(std::string url, int pool_size) : url_(std::move(url)), pool_size_(pool_size) {}
  ~PostgresDatabase() override {
    for (PGconn* connection : idle_) PQfinish(connection);
  }

  SqlDialect dialect() const override { return SqlDialect::kPostgres; }
  std::string MigrationLockSql() const override {
    // Any fixed key: replicas starting together take turns migrating.
    return "SELECT pg_advisory_xact_lock(7326051)";
  }

  absl::StatusOr<PGconn*> Connect() {
    PGconn* connection = PQconnectdb(url_.c_str());
    if (PQstatus(connection) != CONNECTION_OK) {
      std::string message = PQerrorMessage(connection);
      PQfinish(connection);
      return absl::UnavailableError(
          absl::StrCat("store URL ", RedactedStoreUrl(url_), ": cannot connect: ", message));
    }
    PQsetNoticeProcessor(connection, IgnoreNotice, nullptr);
    return connection;
  }

  absl::StatusOr<std::unique_ptr<SqlSession>> Acquire() override {
    std::unique_lock lock(mutex_);
    const auto can_take = [&] { return !idle_.empty() || open_ < pool_size_; };
    const absl::Time deadline = CallDeadline();
    if (deadline == absl::InfiniteFuture()) {
      available_.wait(lock, can_take);
    } else if (!available_.wait_until(lock, absl::ToChronoTime(deadline), can_take)) {
      return absl::UnavailableError(
          absl::StrCat("postgres store ", RedactedStoreUrl(url_), ": all ", pool_size_,
                       " connections stayed busy until the call's deadline"));
    }
    if (!idle_.empty()) {
      PGconn* connection = idle_.front();
      idle_.pop_front();
      // Once one connection is found broken (a server restart or failover),
      // every connection idle since then is suspect, though libpq still calls
      // it OK: reset them all on reuse rather than fail one request each.
      const bool suspect = connection_epoch_[connection] < broken_epoch_;
      connection_epoch_[connection] = broken_epoch_;
      lock.unlock();
      if (suspect || PQstatus(connection) != CONNECTION_OK) PQreset(connection);
      if (PQstatus(connection) != CONNECTION_OK) {
        const std::string message = PQerrorMessage(connection);
        Release(connection);
        return absl::UnavailableError(
            absl::StrCat("store URL ", RedactedStoreUrl(url_), ": connection lost: ", message));
      }
      return std::make_unique<PostgresSession>(this, connection);
    }
    ++open_;
    lock.unlock();
    absl::StatusOr<PGconn*> connection = Connect();
    if (!connection.ok()) {
      std::lock_guard relock(mutex_);
      --open_;
      available_.notify_one();
      return connection.status();
    }
    {
      std::lock_guard relock(mutex_);
      connection_epoch_[*connection] = broken_epoch_;
    }
    return std::make_unique<PostgresSession>(this, *connection);
  }

  void Release(PGconn* connection) {
    std::lock_guard lock(mutex_);
    if (PQstatus(connection) != CONNECTION_OK) {
      ++broken_epoch_;
      connection_epoch_[connection] = broken_epoch_;  // this one gets reset anyway
    }
    idle_.push_back(connection);
    available_.notify_one();
  }

 private:
  const std::string url_;
  const int pool_size_;
  std::mutex mutex_;
  std::condition_variable available_;
  std::deque<PGconn*> idle_;
  int open_ = 0;
  uint64_t broken_epoch_ = 0;
  std::map<PGconn*, uint64_t> connection_epoch_;
};

PostgresSession::~PostgresSession() {
  if (in_transaction_) (void)Rollback();
  database_->Release(connection_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqlDatabase>> OpenPostgresDatabase(const std::string& url,
                                                                  int pool_size) {
  auto database = std::make_unique<PostgresDatabase>(url, pool_size);
  // Connect once now so a wrong URL fails at start, not at the first request.
  absl::StatusOr<std::unique_ptr<SqlSession>> probe = database->Acquire();
  if (!probe.ok()) return probe.status();
  return database;
}

}  // namespace weightpath::store
