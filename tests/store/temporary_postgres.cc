#include "tests/store/temporary_postgres.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace weightpath::store::testing {
namespace {

constexpr char kBin[] = "/usr/lib/postgresql/15/bin";

int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

// Runs a shell command as the postgres user when we are root.
absl::Status RunAsPostgres(const std::string& command) {
  std::string line = command;
  if (geteuid() == 0) line = absl::StrCat("su postgres -s /bin/sh -c '", command, "'");
  const int rc = std::system(line.c_str());
  if (rc != 0) return absl::InternalError(absl::StrCat("`", line, "` exited with ", rc));
  return absl::OkStatus();
}

absl::Status NotOwned(const char* operation) {
  return absl::FailedPreconditionError(absl::StrCat(
      operation, " needs a PostgreSQL of the test's own (TemporaryPostgres::Start), not the one ",
      kTestPostgresUrlVariable, " names"));
}

// `url` with its database (the path) replaced, any ?query kept.
std::string WithDatabase(const std::string& url, const std::string& database) {
  const size_t authority = url.find("://") + 3;
  const size_t query = url.find('?', authority);
  const size_t path = std::min(url.find('/', authority), query);
  return absl::StrCat(url.substr(0, path), "/", database,
                      query == std::string::npos ? "" : url.substr(query));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TemporaryPostgres>> TemporaryPostgres::Start(bool sync_to_disk) {
  char pattern[] = "/tmp/wp-store-pg-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string directory = pattern;
  if (geteuid() == 0) {
    passwd* user = getpwnam("postgres");
    if (user == nullptr) return absl::FailedPreconditionError("no postgres user to run the server as");
    if (chown(directory.c_str(), user->pw_uid, user->pw_gid) != 0) {
      return absl::InternalError("chown of the data directory failed");
    }
  }
  // Never sync at initdb: the template files are rebuilt per test run anyway.
  absl::Status status = RunAsPostgres(absl::StrCat(
      kBin, "/initdb -D ", directory, "/data -A trust -U postgres -E UTF8 --locale=C --no-sync >",
      directory, "/initdb.log 2>&1"));
  if (!status.ok()) return status;

  // A port found free can be taken before the server binds it; try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int port = PickFreePort();
    status = StartServer(directory, port, sync_to_disk);
    if (status.ok()) {
      std::unique_ptr<TemporaryPostgres> server(new TemporaryPostgres());
      server->directory_ = directory;
      server->port_ = port;
      server->sync_to_disk_ = sync_to_disk;
      server->started_ = true;
      return server;
    }
  }
  std::filesystem::remove_all(directory);
  return absl::UnavailableError(absl::StrCat("PostgreSQL did not start: ", status.message()));
}

absl::StatusOr<std::unique_ptr<TemporaryPostgres>> TemporaryPostgres::Attach(const std::string& url) {
  if (!absl::StartsWith(url, "postgres://") && !absl::StartsWith(url, "postgresql://")) {
    return absl::InvalidArgumentError(
        absl::StrCat(kTestPostgresUrlVariable, "=\"", url, "\" must be a postgres:// URL"));
  }
  std::unique_ptr<TemporaryPostgres> server(new TemporaryPostgres());
  server->attached_url_ = url;
  // pid tells concurrent test processes apart; the clock, a later process
  // that reuses the pid of one killed before it could drop its databases.
  static std::atomic<int> instances{0};
  server->name_prefix_ = absl::StrCat("wp_", getpid(), "_", instances.fetch_add(1), "_",
                                      absl::Hex(absl::ToUnixMicros(absl::Now()) & 0xffffffff), "_");
  absl::StatusOr<std::string> fsync = server->Query("SHOW fsync");
  if (!fsync.ok()) {
    return absl::UnavailableError(absl::StrCat(kTestPostgresUrlVariable, "=", url,
                                               " does not answer: ", fsync.status().message()));
  }
  server->sync_to_disk_ = *fsync == "on";
  return server;
}

absl::Status TemporaryPostgres::StartServer(const std::string& directory, int port,
                                            bool sync_to_disk) {
  return RunAsPostgres(absl::StrCat(
      kBin, "/pg_ctl -D ", directory, "/data -o \"-k ", directory, " -p ", port,
      " -c listen_addresses=127.0.0.1", sync_to_disk ? "" : " -c fsync=off", "\" -l ", directory,
      "/server.log -w -t 120 start >/dev/null"));
}

absl::Status TemporaryPostgres::Stop(const std::string& mode) {
  if (!attached_url_.empty()) return NotOwned("Stop");
  if (mode != "fast" && mode != "immediate" && mode != "smart") {
    return absl::InvalidArgumentError(absl::StrCat("pg_ctl stop mode \"", mode, "\""));
  }
  absl::Status status = RunAsPostgres(
      absl::StrCat(kBin, "/pg_ctl -D ", directory_, "/data -m ", mode, " -w stop >/dev/null"));
  if (status.ok()) started_ = false;
  return status;
}

absl::Status TemporaryPostgres::StartAgain() {
  if (!attached_url_.empty()) return NotOwned("StartAgain");
  absl::Status status = StartServer(directory_, port_, sync_to_disk_);
  if (status.ok()) started_ = true;
  return status;
}

TemporaryPostgres::~TemporaryPostgres() {
  if (!attached_url_.empty()) {
    // FORCE: a connection still open (a server binary on its way out, a
    // pool not yet closed) would otherwise keep the database, and the
    // server outlives this process.
    std::lock_guard lock(created_mutex_);
    for (const std::string& name : created_) {
      const absl::Status status =
          Execute(absl::StrCat("DROP DATABASE IF EXISTS \"", name, "\" WITH (FORCE)"));
      if (!status.ok()) std::fprintf(stderr, "%s\n", status.ToString().c_str());
    }
    return;
  }
  if (started_) {
    (void)RunAsPostgres(absl::StrCat(kBin, "/pg_ctl -D ", directory_, "/data -m fast -w stop >/dev/null"));
  }
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

std::string TemporaryPostgres::UrlFor(const std::string& database) const {
  if (attached_url_.empty()) return absl::StrCat("postgres://postgres@127.0.0.1:", port_, "/", database);
  return WithDatabase(attached_url_, database);
}

absl::StatusOr<std::string> TemporaryPostgres::Query(const std::string& statement) const {
  const std::string url = attached_url_.empty() ? UrlFor("postgres") : attached_url_;
  PGconn* connection = PQconnectdb(url.c_str());
  if (PQstatus(connection) != CONNECTION_OK) {
    std::string message = PQerrorMessage(connection);
    PQfinish(connection);
    return absl::UnavailableError(absl::StrCat(url, ": ", message));
  }
  PGresult* result = PQexec(connection, statement.c_str());
  const ExecStatusType outcome = PQresultStatus(result);
  const bool ok = outcome == PGRES_COMMAND_OK || outcome == PGRES_TUPLES_OK;
  std::string value =
      outcome == PGRES_TUPLES_OK && PQntuples(result) > 0 ? PQgetvalue(result, 0, 0) : "";
  std::string message = PQerrorMessage(connection);
  PQclear(result);
  PQfinish(connection);
  if (!ok) return absl::InternalError(absl::StrCat(statement, ": ", message));
  return value;
}

absl::Status TemporaryPostgres::Execute(const std::string& statement) const {
  return Query(statement).status();
}

absl::StatusOr<std::string> TemporaryPostgres::CreateDatabase(const std::string& name) {
  const std::string actual = absl::StrCat(name_prefix_, name);
  // PostgreSQL would silently truncate, and two long names could meet.
  if (actual.size() > 63) {
    return absl::InvalidArgumentError(absl::StrCat("database name ", actual, " is over 63 bytes"));
  }
  absl::Status status = Execute(absl::StrCat("CREATE DATABASE \"", actual, "\""));
  if (!status.ok()) return status;
  if (!attached_url_.empty()) {
    std::lock_guard lock(created_mutex_);
    created_.push_back(actual);
  }
  return UrlFor(actual);
}

namespace {

std::mutex shared_mutex;
std::unique_ptr<TemporaryPostgres> shared_server;

class StopSharedPostgres : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard lock(shared_mutex);
    shared_server.reset();
  }
};

[[maybe_unused]] ::testing::Environment* const registered =
    ::testing::AddGlobalTestEnvironment(new StopSharedPostgres);

}  // namespace

TemporaryPostgres& SharedPostgres(bool sync_to_disk) {
  std::lock_guard lock(shared_mutex);
  if (shared_server == nullptr) {
    const char* url = std::getenv(kTestPostgresUrlVariable);
    const bool given = url != nullptr && url[0] != '\0';
    absl::StatusOr<std::unique_ptr<TemporaryPostgres>> started =
        given ? TemporaryPostgres::Attach(url) : TemporaryPostgres::Start(sync_to_disk);
    // Asked to sync and the server given does not: start one that does.
    if (given && started.ok() && sync_to_disk && !(*started)->syncs_to_disk()) {
      started = TemporaryPostgres::Start(sync_to_disk);
    }
    if (!started.ok()) {
      // Every PostgreSQL test needs it: stop here with the reason.
      std::fprintf(stderr, "cannot start the test PostgreSQL: %s\n",
                   started.status().ToString().c_str());
      std::abort();
    }
    shared_server = std::move(*started);
  }
  return *shared_server;
}

}  // namespace weightpath::store::testing
