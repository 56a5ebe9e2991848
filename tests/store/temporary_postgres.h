// A throwaway PostgreSQL 15 on 127.0.0.1 for tests: its own data directory
// under /tmp, a port picked free at start, stopped and deleted at the end.
// As root the server runs as the `postgres` user (PostgreSQL refuses root).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace weightpath::store::testing {

class TemporaryPostgres {
 public:
  // `sync_to_disk` false starts the server with fsync=off: commits stay
  // atomic and visible exactly as with it on, only an OS crash could lose
  // them, which no test here causes; it spares each CREATE DATABASE and the
  // shutdown checkpoint their fsyncs (tens of seconds on a slow CI disk).
  static absl::StatusOr<std::unique_ptr<TemporaryPostgres>> Start(bool sync_to_disk);
  ~TemporaryPostgres();  // pg_ctl stop -m fast, then removes the directory

  int port() const { return port_; }
  // Stops the server, keeping its data (a database outage).
  absl::Status Stop();
  // Starts it again on the same port and data.
  absl::Status StartAgain();
  // Creates an empty database and returns its postgres:// URL.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name);
  std::string UrlFor(const std::string& database) const;

 private:
  TemporaryPostgres(std::string directory, int port, bool sync_to_disk)
      : directory_(std::move(directory)), port_(port), sync_to_disk_(sync_to_disk) {}
  static absl::Status StartServer(const std::string& directory, int port, bool sync_to_disk);
  std::string directory_;
  int port_;
  bool sync_to_disk_;
  bool started_ = false;
};

// One server for the whole test binary, started on first use (with
// `sync_to_disk` as the first caller asks) and stopped by a gtest global
// environment after the last test.
TemporaryPostgres& SharedPostgres(bool sync_to_disk = false);

}  // namespace weightpath::store::testing
