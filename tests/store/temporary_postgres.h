// PostgreSQL 15 on 127.0.0.1 for tests, in one of two forms:
// - its own cluster (Start): a data directory under /tmp, a port picked free
//   at start, stopped and deleted at the end. As root the server runs as the
//   `postgres` user (PostgreSQL refuses root). Tests that stop or restart
//   PostgreSQL need this form: nobody else may be using the server.
// - a server someone else runs (Attach): scripts/test starts one for the
//   whole CTest run and names it in $WEIGHTPATH_TEST_POSTGRES_URL, so the
//   suites share it instead of each paying for initdb and a start. Databases
//   made through it carry a prefix unique to this fixture instance (so
//   concurrent test processes never collide) and are dropped at the end.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weightpath::store::testing {

// Set by scripts/test: postgres://USER@127.0.0.1:PORT/DB of a running server
// where USER may create and drop databases (DB is any existing one to
// connect to for that, e.g. `postgres`).
inline constexpr char kTestPostgresUrlVariable[] = "WEIGHTPATH_TEST_POSTGRES_URL";

class TemporaryPostgres {
 public:
  // `sync_to_disk` false starts the server with fsync=off: commits stay
  // atomic and visible exactly as with it on, only an OS crash could lose
  // them, which no test here causes; it spares each CREATE DATABASE and the
  // shutdown checkpoint their fsyncs (tens of seconds on a slow CI disk).
  static absl::StatusOr<std::unique_ptr<TemporaryPostgres>> Start(bool sync_to_disk);
  // Uses the running server `url` (see kTestPostgresUrlVariable); checks
  // that it answers.
  static absl::StatusOr<std::unique_ptr<TemporaryPostgres>> Attach(const std::string& url);
  // Own cluster: pg_ctl stop -m fast, then removes the directory.
  // Attached: drops the databases this instance created.
  ~TemporaryPostgres();

  // Own cluster only: stops the server, keeping its data (a database outage).
  // `mode` is pg_ctl's -m: "fast" (sessions are ended, a clean shutdown) or
  // "immediate" (every process quits at once; the next start recovers from
  // the WAL, as after a crash).
  absl::Status Stop(const std::string& mode = "fast");
  // Own cluster only: starts it again on the same port and data.
  absl::Status StartAgain();
  // Creates an empty database and returns its postgres:// URL. Attached,
  // the actual name is `name` behind this instance's unique prefix.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name);
  std::string UrlFor(const std::string& database) const;
  // Whether commits reach the disk (fsync on) before they are acknowledged.
  bool syncs_to_disk() const { return sync_to_disk_; }

 private:
  TemporaryPostgres() = default;
  static absl::Status StartServer(const std::string& directory, int port, bool sync_to_disk);
  // Runs one statement on the server's maintenance database; the first
  // column of its first row, if any.
  absl::StatusOr<std::string> Query(const std::string& statement) const;
  absl::Status Execute(const std::string& statement) const;

  bool sync_to_disk_ = false;
  // Own cluster.
  std::string directory_;
  int port_ = -1;
  bool started_ = false;
  // Attached: the URL given, and the databases to drop.
  std::string attached_url_;
  std::string name_prefix_;
  std::mutex created_mutex_;
  std::vector<std::string> created_;
};

// One server for the whole test binary, chosen on first use: the one
// $WEIGHTPATH_TEST_POSTGRES_URL names when set, unless the first caller asks
// for `sync_to_disk` and that server runs without fsync (scripts/test's
// does); otherwise its own, started with `sync_to_disk` as that caller asks.
// Released by a gtest global environment after the last test.
TemporaryPostgres& SharedPostgres(bool sync_to_disk = false);

}  // namespace weightpath::store::testing
