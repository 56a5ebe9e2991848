// A test's own connection to a server's SQLite file: to hold the write lock
// (BEGIN IMMEDIATE) so the server's writes wait, or to read what it wrote.
// Every failure is a test failure, reported where it happens. The test
// target links SQLite::SQLite3.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace weightpath::store::testing {

class SqliteFileConnection {
 public:
  explicit SqliteFileConnection(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << "open " << path << ": " << sqlite3_errmsg(db_);
    }
    // The server may be inside a write of its own at the moment we lock.
    sqlite3_busy_timeout(db_, 10000);
  }
  ~SqliteFileConnection() { sqlite3_close(db_); }
  SqliteFileConnection(const SqliteFileConnection&) = delete;
  SqliteFileConnection& operator=(const SqliteFileConnection&) = delete;

  bool Exec(const char* sql) {
    char* error = nullptr;
    const bool ok = sqlite3_exec(db_, sql, nullptr, nullptr, &error) == SQLITE_OK;
    if (!ok) ADD_FAILURE() << sql << ": " << (error != nullptr ? error : "?");
    sqlite3_free(error);
    return ok;
  }

  // The first column of the first row of `sql`, a count; -1 on failure.
  int64_t Count(const char* sql) {
    sqlite3_stmt* statement = nullptr;
    int64_t count = -1;
    if (sqlite3_prepare_v2(db_, sql, -1, &statement, nullptr) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW) {
      count = sqlite3_column_int64(statement, 0);
    } else {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
    }
    sqlite3_finalize(statement);
    return count;
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace weightpath::store::testing
