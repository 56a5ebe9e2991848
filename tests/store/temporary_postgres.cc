#include "tests/store/temporary_postgres.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
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
      std::unique_ptr<TemporaryPostgres> server(new TemporaryPostgres(directory, port, sync_to_disk));
      server->started_ = true;
      return server;
    }
  }
  std::filesystem::remove_all(directory);
  return absl::UnavailableError(absl::StrCat("PostgreSQL did not start: ", status.message()));
}

absl::Status TemporaryPostgres::StartServer(const std::string& directory, int port,
                                            bool sync_to_disk) {
  return RunAsPostgres(absl::StrCat(
      kBin, "/pg_ctl -D ", directory, "/data -o \"-k ", directory, " -p ", port,
      " -c listen_addresses=127.0.0.1", sync_to_disk ? "" : " -c fsync=off", "\" -l ", directory,
      "/server.log -w -t 120 start >/dev/null"));
}

absl::Status TemporaryPostgres::Stop() {
  absl::Status status =
      RunAsPostgres(absl::StrCat(kBin, "/pg_ctl -D ", directory_, "/data -m fast -w stop >/dev/null"));
  if (status.ok()) started_ = false;
  return status;
}

absl::Status TemporaryPostgres::StartAgain() {
  absl::Status status = StartServer(directory_, port_, sync_to_disk_);
  if (status.ok()) started_ = true;
  return status;
}

TemporaryPostgres::~TemporaryPostgres() {
  if (started_) {
    (void)RunAsPostgres(absl::StrCat(kBin, "/pg_ctl -D ", directory_, "/data -m fast -w stop >/dev/null"));
  }
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

std::string TemporaryPostgres::UrlFor(const std::string& database) const {
  return absl::StrCat("postgres://postgres@127.0.0.1:", port_, "/", database);
}

absl::StatusOr<std::string> TemporaryPostgres::CreateDatabase(const std::string& name) {
  PGconn* connection = PQconnectdb(UrlFor("postgres").c_str());
  if (PQstatus(connection) != CONNECTION_OK) {
    std::string message = PQerrorMessage(connection);
    PQfinish(connection);
    return absl::UnavailableError(message);
  }
  PGresult* result = PQexec(connection, absl::StrCat("CREATE DATABASE \"", name, "\"").c_str());
  const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  std::string message = PQerrorMessage(connection);
  PQclear(result);
  PQfinish(connection);
  if (!ok) return absl::InternalError(absl::StrCat("CREATE DATABASE ", name, ": ", message));
  return UrlFor(name);
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
    absl::StatusOr<std::unique_ptr<TemporaryPostgres>> started = TemporaryPostgres::Start(sync_to_disk);
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
