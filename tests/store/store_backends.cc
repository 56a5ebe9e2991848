#include "tests/store/store_backends.h"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "common/status_macros.h"
#include "store/sql_database.h"
#include "store/store.h"
#include "store/time_convert.h"
#include "tests/store/temporary_postgres.h"

namespace weightpath::store::testing {
namespace {

std::atomic<int> next_database{0};
std::mutex directory_mutex;
std::string sqlite_directory;

class RemoveSqliteDirectory : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard lock(directory_mutex);
    if (!sqlite_directory.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(sqlite_directory, ignored);
    }
  }
};

[[maybe_unused]] ::testing::Environment* const registered =
    ::testing::AddGlobalTestEnvironment(new RemoveSqliteDirectory);

}  // namespace

std::string BackendName(Backend backend) {
  return backend == Backend::kSqlite ? "Sqlite" : "Postgres";
}

absl::StatusOr<std::string> FreshDatabaseUrl(Backend backend, bool sync_to_disk) {
  const int number = next_database.fetch_add(1);
  if (backend == Backend::kPostgres) {
    return SharedPostgres(sync_to_disk).CreateDatabase(absl::StrCat("store_test_", number));
  }
  std::lock_guard lock(directory_mutex);
  if (sqlite_directory.empty()) {
    char pattern[] = "/tmp/wp-store-sqlite-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp failed");
    sqlite_directory = pattern;
  }
  return absl::StrCat("sqlite:", sqlite_directory, "/fleet-", number, ".db");
}

v1::Device MakeDevice(const std::string& device_id, const std::string& hardware_class,
                      const std::string& path, const std::string& cpu_model, absl::Time seen) {
  v1::Device device;
  device.set_device_id(device_id);
  device.set_hardware_class(hardware_class);
  device.set_path(path);
  device.mutable_profile()->set_arch(hardware_class == "arm64_cpu" ? "aarch64" : "x86_64");
  device.mutable_profile()->set_cpu_model(cpu_model);
  device.mutable_profile()->add_cpu_flags("avx512f");
  device.mutable_profile()->set_accelerator("none");
  device.set_model("Spark-X2.5-1.7B");
  device.mutable_artifact()->set_uri(absl::StrCat("https://artifacts.example/", path, ".tar"));
  device.mutable_artifact()->set_sha256(std::string(64, 'a'));
  device.mutable_artifact()->set_size_bytes(1234);
  device.mutable_artifact()->set_version("1");
  device.set_policy_version("sha256:0123456789abcdef");
  device.set_agent_version("0.1.0");
  device.set_effective_priority(v1::PRIORITY_SPEED);
  *device.mutable_last_seen() = ToTimestamp(seen);
  return device;
}

absl::Status InsertAuditRows(const std::string& url, const std::vector<AuditRow>& rows) {
  RETURN_IF_ERROR(OpenFleetStore(url).status());
  ASSIGN_OR_RETURN(std::unique_ptr<SqlDatabase> database, OpenSqlDatabase(url));
  ASSIGN_OR_RETURN(std::unique_ptr<SqlSession> session, database->Acquire());
  RETURN_IF_ERROR(session->Begin(/*for_write=*/true));
  for (const AuditRow& row : rows) {
    RETURN_IF_ERROR(session
                        ->Query("INSERT INTO audit_events (time_us, identity, role, rpc, target, "
                                "request_summary, result, message, replica) VALUES ($1, $2, $3, "
                                "$4, $5, $6, $7, $8, 'test')",
                                {ToMicros(row.time), row.identity, row.role, row.rpc, row.target,
                                 row.request_summary, row.result, row.message})
                        .status());
  }
  return session->Commit();
}

}  // namespace weightpath::store::testing
