// One suite, run unchanged against SQLite and a real PostgreSQL 15.
#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/status_macros.h"
#include "google/protobuf/unknown_field_set.h"
#include "store/schema.h"
#include "store/sql_database.h"
#include "store/encoded_device.h"
#include "store/store.h"
#include "store/time_convert.h"
#include "tests/store/seed_expectations.h"
#include "tests/store/store_backends.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::store::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::IsOkAndHolds;
using ::weightpath::testing::StatusIs;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

v1::ReportMeasurementRequest Measurement(const std::string& key, const std::string& device_id,
                                         const std::string& path, double decode_tok_s,
                                         absl::Time measured_at) {
  v1::ReportMeasurementRequest request;
  request.set_idempotency_key(key);
  request.set_device_id(device_id);
  request.set_model("Spark-X2.5-1.7B");
  request.set_path(path);
  request.set_engine_version("vllm 0.28");
  request.set_decode_tok_s(decode_tok_s);
  request.set_prefill_tok_s(900);
  request.set_gemm_ms_per_step(5.91);
  request.set_step_ms(11.55);
  request.set_threads(24);
  request.set_fidelity_exact_matches(1);
  request.set_fidelity_prompts(12);
  *request.mutable_measured_at() = ToTimestamp(measured_at);
  return request;
}

class StoreConformance : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
    ASSERT_THAT(url, IsOk());
    url_ = *url;
    absl::StatusOr<std::unique_ptr<FleetStore>> store = OpenFleetStore(url_);
    ASSERT_THAT(store, IsOk());
    store_ = std::move(*store);
  }

  void Register(const std::string& id, const std::string& hardware_class = "x86_cpu",
                const std::string& path = "w4a8-amx", const std::string& cpu = kSeedCpuAsProbed,
                absl::Time seen = kT0) {
    ASSERT_THAT(store_->UpsertDevices({MakeDevice(id, hardware_class, path, cpu, seen)}), IsOk());
  }

  std::string url_;
  std::unique_ptr<FleetStore> store_;
};

// --- Migrations --------------------------------------------------------------

TEST_P(StoreConformance, FreshDatabaseIsMigratedToTheLatestVersion) {
  EXPECT_EQ(store_->schema_version(), LatestSchemaVersion());
  auto database = OpenSqlDatabase(url_);
  ASSERT_THAT(database, IsOk());
  auto session = (*database)->Acquire();
  ASSERT_THAT(session, IsOk());
  auto rows = (*session)->Query("SELECT version FROM schema_version ORDER BY version");
  ASSERT_THAT(rows, IsOk());
  ASSERT_THAT(*rows, SizeIs(LatestSchemaVersion()));
  for (int i = 0; i < LatestSchemaVersion(); ++i) EXPECT_EQ((*rows)[i][0], absl::StrCat(i + 1));
}

TEST_P(StoreConformance, ReopeningKeepsDataAndAppliesNothingTwice) {
  Register("dev-a");
  store_.reset();
  auto reopened = OpenFleetStore(url_);
  ASSERT_THAT(reopened, IsOk());
  EXPECT_THAT((*reopened)->GetDevice("dev-a"), IsOk());
  auto database = OpenSqlDatabase(url_);
  ASSERT_THAT(database, IsOk());
  auto session = (*database)->Acquire();
  ASSERT_THAT(session, IsOk());
  auto rows = (*session)->Query("SELECT COUNT(*) FROM schema_version");
  ASSERT_THAT(rows, IsOk());
  EXPECT_EQ((*rows)[0][0], absl::StrCat(LatestSchemaVersion()));
}

TEST_P(StoreConformance, RefusesASchemaNewerThanTheBinary) {
  store_.reset();
  {
    auto database = OpenSqlDatabase(url_);
    ASSERT_THAT(database, IsOk());
    auto session = (*database)->Acquire();
    ASSERT_THAT(session, IsOk());
    ASSERT_THAT((*session)
                    ->Query("INSERT INTO schema_version (version, applied_at_us, description) "
                            "VALUES ($1, 0, 'from the future')",
                            {int64_t{LatestSchemaVersion() + 1}})
                    .status(),
                IsOk());
  }
  EXPECT_THAT(OpenFleetStore(url_),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::AllOf(HasSubstr(absl::StrCat(LatestSchemaVersion() + 1)),
                                        HasSubstr(absl::StrCat("(", LatestSchemaVersion(), ")")))));
}

// --- Device registry -----------------------------------------------------------

TEST_P(StoreConformance, UpsertThenGetRoundTripsEveryField) {
  v1::Device device = MakeDevice("dev-a", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0);
  (*device.mutable_labels())["workload"] = "agentic";
  device.set_rollout_id("fidelity-agentic");
  device.set_effective_priority(v1::PRIORITY_FIDELITY);
  ASSERT_THAT(store_->UpsertDevices({device}), IsOk());
  auto stored = store_->GetDevice("dev-a");
  ASSERT_THAT(stored, IsOk());
  v1::Device expected = device;
  *expected.mutable_first_seen() = ToTimestamp(kT0);
  *expected.mutable_rollout_since() = ToTimestamp(kT0);  // the first record with its rollout
  EXPECT_EQ(stored->SerializeAsString(), expected.SerializeAsString()) << stored->DebugString();
}

// The first resolve that gave a device its rollout is kept while the
// rollout stays, whatever else changes; a new rollout starts it again.
TEST_P(StoreConformance, RolloutSinceIsTheFirstRecordWithTheDevicesCurrentRollout) {
  const auto record = [&](const std::string& path, const std::string& rollout, absl::Time at) {
    v1::Device device = MakeDevice("dev-a", "x86_cpu", path, kSeedCpuAsProbed, at);
    device.set_rollout_id(rollout);
    ASSERT_THAT(store_->UpsertDevices({device}), IsOk());
  };
  record("w4a8-amx", "", kT0);
  EXPECT_FALSE(store_->GetDevice("dev-a")->has_rollout_since());
  record("w4a16-tinygemm", "fid", kT0 + absl::Minutes(50));
  record("w4a16-tinygemm", "fid", kT0 + absl::Minutes(55));  // an unchanged resolve
  record("bf16", "fid", kT0 + absl::Minutes(60));            // the record changed, not the rollout
  EXPECT_EQ(FromProtoTime(store_->GetDevice("dev-a")->rollout_since()), kT0 + absl::Minutes(50));
  record("w4a8-amx", "", kT0 + absl::Minutes(70));  // aborted
  EXPECT_FALSE(store_->GetDevice("dev-a")->has_rollout_since());
  record("w4a16-tinygemm", "fid", kT0 + absl::Minutes(80));
  EXPECT_EQ(FromProtoTime(store_->GetDevice("dev-a")->rollout_since()), kT0 + absl::Minutes(80));
  auto listed = store_->ListDevices(DeviceQuery{});
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->devices.size(), 1u);
  EXPECT_EQ(FromProtoTime(listed->devices[0].rollout_since()), kT0 + absl::Minutes(80));
}

TEST_P(StoreConformance, UpsertKeepsFirstSeenAndIgnoresOlderRecords) {
  Register("dev-a", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0);
  Register("dev-a", "x86_cpu", "w4a16-tinygemm", kSeedCpuAsProbed, kT0 + absl::Hours(1));
  Register("dev-a", "x86_cpu", "bf16", kSeedCpuAsProbed, kT0 + absl::Minutes(30));  // late arrival
  auto stored = store_->GetDevice("dev-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(FromProtoTime(stored->first_seen()), kT0);
  EXPECT_EQ(FromProtoTime(stored->last_seen()), kT0 + absl::Hours(1));
  EXPECT_EQ(stored->path(), "w4a16-tinygemm");
}

TEST_P(StoreConformance, DeviceListedTwiceInOneBatchKeepsItsNewestRecord) {
  ASSERT_THAT(store_->UpsertDevices({
                  MakeDevice("dev-a", "x86_cpu", "w4a16-tinygemm", kSeedCpu, kT0 + absl::Hours(2)),
                  MakeDevice("dev-b", "x86_cpu", "w4a8-amx", kSeedCpu, kT0),
                  MakeDevice("dev-a", "x86_cpu", "w4a8-amx", kSeedCpu, kT0 + absl::Hours(1)),
              }),
              IsOk());
  auto stored = store_->GetDevice("dev-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->path(), "w4a16-tinygemm");
  EXPECT_EQ(FromProtoTime(stored->last_seen()), kT0 + absl::Hours(2));
  EXPECT_THAT(store_->GetDevice("dev-b"), IsOk());
}

TEST_P(StoreConformance, UpsertNamesTheRecordMissingAnId) {
  v1::Device nameless = MakeDevice("", "x86_cpu", "w4a8-amx", kSeedCpu, kT0);
  EXPECT_THAT(store_->UpsertDevices({MakeDevice("ok", "x86_cpu", "w4a8-amx", kSeedCpu, kT0), nameless}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("devices[1].device_id")));
  v1::Device timeless = MakeDevice("dev-b", "x86_cpu", "w4a8-amx", kSeedCpu, kT0);
  timeless.clear_last_seen();
  EXPECT_THAT(store_->UpsertDevices({timeless}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("devices[0].last_seen")));
}

TEST_P(StoreConformance, GetUnknownDeviceIsNotFoundNamingIt) {
  EXPECT_THAT(store_->GetDevice("ghost"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("ghost")));
}

std::vector<std::string> Ids(const std::vector<v1::Device>& devices) {
  std::vector<std::string> ids;
  for (const auto& device : devices) ids.push_back(device.device_id());
  return ids;
}

TEST_P(StoreConformance, ListFiltersByClassPathSeenSinceAndLabels) {
  std::vector<v1::Device> batch = {
      MakeDevice("a", "x86_cpu", "w4a8-amx", kSeedCpu, kT0),
      MakeDevice("b", "x86_cpu", "w4a16-tinygemm", kSeedCpu, kT0 + absl::Hours(2)),
      MakeDevice("c", "arm64_cpu", "w4a16-tinygemm", "Neoverse-N1", kT0 + absl::Hours(2)),
      MakeDevice("d", "x86_cpu", "w4a8-amx", kSeedCpu, kT0 + absl::Hours(3)),
  };
  (*batch[0].mutable_labels())["workload"] = "agentic";
  (*batch[3].mutable_labels())["workload"] = "agentic";
  ASSERT_THAT(store_->UpsertDevices(batch), IsOk());

  DeviceQuery by_class;
  by_class.hardware_class = "x86_cpu";
  EXPECT_THAT(Ids(store_->ListDevices(by_class)->devices), ElementsAre("a", "b", "d"));
  DeviceQuery by_path;
  by_path.path = "w4a16-tinygemm";
  EXPECT_THAT(Ids(store_->ListDevices(by_path)->devices), ElementsAre("b", "c"));
  DeviceQuery recent;
  recent.seen_since = kT0 + absl::Hours(2);
  EXPECT_THAT(Ids(store_->ListDevices(recent)->devices), ElementsAre("b", "c", "d"));
  DeviceQuery agentic_x86;
  agentic_x86.hardware_class = "x86_cpu";
  agentic_x86.label_predicate = [](const DeviceLabels& labels) {
    auto it = labels.find("workload");
    return it != labels.end() && it->second == "agentic";
  };
  EXPECT_THAT(Ids(store_->ListDevices(agentic_x86)->devices), ElementsAre("a", "d"));
}

TEST_P(StoreConformance, KeysetPagesCoverEveryDeviceOnceInOrder) {
  std::vector<v1::Device> batch;
  for (int i = 0; i < 25; ++i) {
    batch.push_back(MakeDevice(absl::StrFormat("dev-%03d", i), "x86_cpu", "w4a8-amx", kSeedCpu, kT0));
  }
  ASSERT_THAT(store_->UpsertDevices(batch), IsOk());

  for (bool with_predicate : {false, true}) {
    SCOPED_TRACE(with_predicate ? "with label predicate" : "plain");
    DeviceQuery query;
    query.page_size = 4;
    if (with_predicate) {
      // Keeps every device: the predicate path must paginate identically.
      query.label_predicate = [](const DeviceLabels& labels) { return labels.empty(); };
    }
    std::vector<std::string> seen;
    std::vector<size_t> page_sizes;
    while (true) {
      auto page = store_->ListDevices(query);
      ASSERT_THAT(page, IsOk());
      page_sizes.push_back(page->devices.size());
      for (const auto& id : Ids(page->devices)) seen.push_back(id);
      if (page->next_page_token.empty()) break;
      query.page_token = page->next_page_token;
    }
    EXPECT_THAT(page_sizes, ElementsAre(4, 4, 4, 4, 4, 4, 1));
    EXPECT_THAT(seen, ElementsAre("dev-000", "dev-001", "dev-002", "dev-003", "dev-004", "dev-005",
                                  "dev-006", "dev-007", "dev-008", "dev-009", "dev-010", "dev-011",
                                  "dev-012", "dev-013", "dev-014", "dev-015", "dev-016", "dev-017",
                                  "dev-018", "dev-019", "dev-020", "dev-021", "dev-022", "dev-023",
                                  "dev-024"));
  }
}

TEST_P(StoreConformance, PageSizeDefaultsTo100AndIsCappedAt1000) {
  std::vector<v1::Device> batch;
  for (int i = 0; i < 150; ++i) {
    batch.push_back(MakeDevice(absl::StrFormat("dev-%03d", i), "x86_cpu", "w4a8-amx", kSeedCpu, kT0));
  }
  ASSERT_THAT(store_->UpsertDevices(batch), IsOk());
  auto page = store_->ListDevices(DeviceQuery{});
  ASSERT_THAT(page, IsOk());
  EXPECT_THAT(page->devices, SizeIs(100));
  EXPECT_FALSE(page->next_page_token.empty());
  DeviceQuery too_big;
  too_big.page_size = 1001;
  EXPECT_THAT(store_->ListDevices(too_big),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_size")));
  DeviceQuery forged;
  forged.page_token = "dev-010";
  EXPECT_THAT(store_->ListDevices(forged),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token")));
}

TEST_P(StoreConformance, SummaryCountsDevicesSeenByClassAndPath) {
  ASSERT_THAT(store_->UpsertDevices({
                  MakeDevice("a", "x86_cpu", "w4a8-amx", kSeedCpu, kT0),
                  MakeDevice("b", "x86_cpu", "w4a8-amx", kSeedCpu, kT0 + absl::Hours(1)),
                  MakeDevice("c", "x86_cpu", "w4a16-tinygemm", kSeedCpu, kT0 + absl::Hours(1)),
                  MakeDevice("d", "arm64_cpu", "w4a16-tinygemm", "Neoverse-N1", kT0 + absl::Hours(1)),
              }),
              IsOk());
  auto all = store_->FleetSummary(absl::InfinitePast());
  ASSERT_THAT(all, IsOk());
  EXPECT_EQ(all->total_devices(), 4u);
  ASSERT_THAT(all->cells(), SizeIs(3));
  EXPECT_EQ(all->cells(0).hardware_class(), "arm64_cpu");
  EXPECT_EQ(all->cells(2).path(), "w4a8-amx");
  EXPECT_EQ(all->cells(2).devices(), 2u);

  auto recent = store_->DevicesSeenByClassAndPath(kT0 + absl::Minutes(30));
  ASSERT_THAT(recent, IsOk());
  EXPECT_EQ(recent->size(), 3u);
  EXPECT_EQ((recent->at({"x86_cpu", "w4a8-amx"})), 1u);
  EXPECT_EQ((recent->at({"arm64_cpu", "w4a16-tinygemm"})), 1u);
}

// --- What a registry write rewrites ---------------------------------------------

// When the stored record (the wide devices row) was last written.
absl::StatusOr<int64_t> RecordedAt(const std::string& url, const std::string& device_id) {
  auto database = OpenSqlDatabase(url);
  if (!database.ok()) return database.status();
  auto session = (*database)->Acquire();
  if (!session.ok()) return session.status();
  auto rows = (*session)->Query("SELECT recorded_us FROM devices WHERE device_id = $1", {device_id});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return absl::NotFoundError(device_id);
  return CellInt((*rows)[0][0], "recorded_us");
}

TEST_P(StoreConformance, UnchangedRecordSeenAgainMovesOnlyLastSeen) {
  Register("dev-a", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0);
  Register("dev-a", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0 + absl::Hours(1));
  EXPECT_THAT(RecordedAt(url_, "dev-a"), IsOkAndHolds(ToMicros(kT0)));

  auto stored = store_->GetDevice("dev-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(FromProtoTime(stored->first_seen()), kT0);
  EXPECT_EQ(FromProtoTime(stored->last_seen()), kT0 + absl::Hours(1));
  DeviceQuery recent;
  recent.seen_since = kT0 + absl::Minutes(30);
  auto page = store_->ListDevices(recent);
  ASSERT_THAT(page, IsOk());
  ASSERT_THAT(page->devices, SizeIs(1));
  EXPECT_EQ(FromProtoTime(page->devices[0].last_seen()), kT0 + absl::Hours(1));
  auto summary = store_->FleetSummary(kT0 + absl::Minutes(30));
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->total_devices(), 1u);
}

TEST_P(StoreConformance, ChangedRecordIsRewrittenWhole) {
  Register("dev-a", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0);
  v1::Device relabelled = MakeDevice("dev-a", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0 + absl::Hours(1));
  (*relabelled.mutable_labels())["workload"] = "agentic";
  ASSERT_THAT(store_->UpsertDevices({relabelled}), IsOk());
  EXPECT_THAT(RecordedAt(url_, "dev-a"), IsOkAndHolds(ToMicros(kT0 + absl::Hours(1))));
  Register("dev-a", "x86_cpu", "w4a16-tinygemm", kSeedCpuAsProbed, kT0 + absl::Hours(2));

  auto stored = store_->GetDevice("dev-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->path(), "w4a16-tinygemm");
  EXPECT_TRUE(stored->labels().empty());
  DeviceQuery old_path;
  old_path.path = "w4a8-amx";
  auto page = store_->ListDevices(old_path);
  ASSERT_THAT(page, IsOk());
  EXPECT_THAT(page->devices, SizeIs(0));
  old_path.path = "w4a16-tinygemm";
  page = store_->ListDevices(old_path);
  ASSERT_THAT(page, IsOk());
  EXPECT_THAT(page->devices, SizeIs(1));
}

// The profile a device sent, in its own column: GetDevice returns it as
// stored, listings leave it out unless asked, and a resolve that moved only
// free RAM keeps the stored one (the sighting alone is bumped).
TEST_P(StoreConformance, HardwareProfileIsKeptAsSentAndRewrittenOnlyWhenItChanges) {
  v1::Device device = MakeDevice("gpu-a", "cuda_discrete", "bf16", kSeedCpuAsProbed, kT0);
  v1::HardwareProfile& profile = *device.mutable_hardware_profile();
  profile.set_arch("x86_64");
  profile.set_cpu_model(kSeedCpuAsProbed);
  profile.set_accelerator("cuda_discrete");
  profile.set_supports_bf16(true);
  profile.set_ram_total_bytes(uint64_t{64} << 30);
  profile.set_ram_available_bytes(uint64_t{40} << 30);
  v1::GpuDevice& gpu = *profile.add_gpus();
  gpu.set_name("NVIDIA GeForce RTX 4090");
  gpu.set_memory_total_bytes(uint64_t{24} << 30);
  gpu.add_capability(8);
  gpu.add_capability(9);
  ASSERT_THAT(store_->UpsertDevices({device}), IsOk());
  auto stored = store_->GetDevice("gpu-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->hardware_profile().SerializeAsString(), profile.SerializeAsString());
  EXPECT_EQ(FromProtoTime(stored->profile_recorded_at()), kT0);
  auto listed = store_->ListDevices(DeviceQuery{});
  ASSERT_THAT(listed, IsOk());
  ASSERT_THAT(listed->devices, SizeIs(1));
  EXPECT_FALSE(listed->devices[0].has_hardware_profile());
  DeviceQuery with_profiles;
  with_profiles.with_profiles = true;
  listed = store_->ListDevices(with_profiles);
  ASSERT_THAT(listed, IsOk());
  ASSERT_THAT(listed->devices, SizeIs(1));
  EXPECT_TRUE(listed->devices[0].hardware_profile().supports_bf16());

  // Free RAM moved: the same record, only last_seen moves.
  device.mutable_hardware_profile()->set_ram_available_bytes(uint64_t{12} << 30);
  *device.mutable_last_seen() = ToTimestamp(kT0 + absl::Hours(1));
  ASSERT_THAT(store_->UpsertDevices({device}), IsOk());
  EXPECT_THAT(RecordedAt(url_, "gpu-a"), IsOkAndHolds(ToMicros(kT0)));
  stored = store_->GetDevice("gpu-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->hardware_profile().ram_available_bytes(), uint64_t{40} << 30);
  EXPECT_EQ(FromProtoTime(stored->last_seen()), kT0 + absl::Hours(1));

  // Anything else moved (a driver update dropped bf16): rewritten.
  device.mutable_hardware_profile()->set_supports_bf16(false);
  *device.mutable_last_seen() = ToTimestamp(kT0 + absl::Hours(2));
  ASSERT_THAT(store_->UpsertDevices({device}), IsOk());
  stored = store_->GetDevice("gpu-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_FALSE(stored->hardware_profile().supports_bf16());
  EXPECT_EQ(stored->hardware_profile().ram_available_bytes(), uint64_t{12} << 30);
  EXPECT_EQ(FromProtoTime(stored->profile_recorded_at()), kT0 + absl::Hours(2));

  // A record without a profile (an older writer) leaves the stored one.
  v1::Device summary_only = MakeDevice("gpu-a", "cuda_discrete", "fp16", kSeedCpuAsProbed,
                                       kT0 + absl::Hours(3));
  ASSERT_THAT(store_->UpsertDevices({summary_only}), IsOk());
  stored = store_->GetDevice("gpu-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->path(), "fp16");
  EXPECT_EQ(stored->hardware_profile().gpus(0).name(), "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(FromProtoTime(stored->profile_recorded_at()), kT0 + absl::Hours(2));

  // Bounded: a profile past kMaxStoredProfileBytes is refused naming it.
  EncodedDevice huge = EncodeDevice(MakeDevice("gpu-b", "cuda_discrete", "bf16", kSeedCpu, kT0));
  huge.profile.assign(kMaxStoredProfileBytes + 1, 'x');
  EXPECT_THAT(store_->UpsertEncodedDevices({huge}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("devices[0].profile")));
}

TEST_P(StoreConformance, ChangedRecordOlderThanTheLastSightingIsIgnored) {
  // The device was seen unchanged at T0+2h; a record from T0+1h with another
  // path arrives late (another replica's slow flush). It must not replace the
  // record the device still had at T0+2h.
  Register("dev-a", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0);
  Register("dev-a", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0 + absl::Hours(2));
  Register("dev-a", "x86_cpu", "bf16", kSeedCpuAsProbed, kT0 + absl::Hours(1));
  auto stored = store_->GetDevice("dev-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->path(), "w4a8-amx");
  EXPECT_EQ(FromProtoTime(stored->last_seen()), kT0 + absl::Hours(2));
}

TEST_P(StoreConformance, RegistryWrittenBySchemaVersion3IsCarriedOver) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
  ASSERT_THAT(url, IsOk());
  v1::Device device = MakeDevice("dev-old", "arm64_cpu", "w4a16-tinygemm", "Neoverse-N1", kT0);
  *device.mutable_first_seen() = ToTimestamp(kT0 - absl::Hours(5));
  {
    auto database = OpenSqlDatabase(*url);
    ASSERT_THAT(database, IsOk());
    ASSERT_THAT(ApplyMigrations(**database, 3), IsOkAndHolds(3));
    auto session = (*database)->Acquire();
    ASSERT_THAT(session, IsOk());
    // As version 3 wrote it: the times also inside the body.
    ASSERT_THAT((*session)
                    ->Query("INSERT INTO devices (device_id, hardware_class, path, cpu_model, "
                            "first_seen_us, last_seen_us, body) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                            {device.device_id(), device.hardware_class(), device.path(),
                             device.profile().cpu_model(), ToMicros(kT0 - absl::Hours(5)),
                             ToMicros(kT0), SqlBlob{device.SerializeAsString()}})
                    .status(),
                IsOk());
  }
  auto upgraded = OpenFleetStore(*url);
  ASSERT_THAT(upgraded, IsOk());
  EXPECT_EQ((*upgraded)->schema_version(), LatestSchemaVersion());
  auto stored = (*upgraded)->GetDevice("dev-old");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->SerializeAsString(), device.SerializeAsString()) << stored->DebugString();
  DeviceQuery arm;
  arm.hardware_class = "arm64_cpu";
  arm.seen_since = kT0;
  auto page = (*upgraded)->ListDevices(arm);
  ASSERT_THAT(page, IsOk());
  EXPECT_THAT(page->devices, SizeIs(1));
  auto summary = (*upgraded)->FleetSummary(kT0);
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->total_devices(), 1u);

  // The carried-over row has no fingerprint: its next sighting rewrites the
  // body once (without the times), the one after only moves last_seen.
  device.clear_first_seen();
  *device.mutable_last_seen() = ToTimestamp(kT0 + absl::Hours(1));
  ASSERT_THAT((*upgraded)->UpsertDevices({device}), IsOk());
  EXPECT_THAT(RecordedAt(*url, "dev-old"), IsOkAndHolds(ToMicros(kT0 + absl::Hours(1))));
  *device.mutable_last_seen() = ToTimestamp(kT0 + absl::Hours(2));
  ASSERT_THAT((*upgraded)->UpsertDevices({device}), IsOk());
  EXPECT_THAT(RecordedAt(*url, "dev-old"), IsOkAndHolds(ToMicros(kT0 + absl::Hours(1))));
  stored = (*upgraded)->GetDevice("dev-old");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(FromProtoTime(stored->first_seen()), kT0 - absl::Hours(5));
  EXPECT_EQ(FromProtoTime(stored->last_seen()), kT0 + absl::Hours(2));
}

// --- Measurements ------------------------------------------------------------

TEST_P(StoreConformance, MeasurementIsStampedWithTheDevicesHardware) {
  Register("dev-a");
  auto result = store_->RecordMeasurement(Measurement("k1", "dev-a", "w4a8-amx", 85.0, kT0), kT0);
  ASSERT_THAT(result, IsOk());
  EXPECT_FALSE(result->duplicate);
  auto rows = store_->ListMeasurements(absl::InfinitePast());
  ASSERT_THAT(rows, IsOk());
  ASSERT_THAT(*rows, SizeIs(1));
  EXPECT_EQ((*rows)[0].measurement_id, result->measurement_id);
  EXPECT_EQ((*rows)[0].hardware_class, "x86_cpu");
  EXPECT_EQ((*rows)[0].cpu_model, kSeedCpuAsProbed);
  EXPECT_EQ((*rows)[0].decode_tok_s, 85.0);
  EXPECT_EQ((*rows)[0].gemm_ms_per_step, 5.91);
  EXPECT_EQ((*rows)[0].measured_at, kT0);
}

TEST_P(StoreConformance, RetriedMeasurementIsADuplicateAndStoresNothing) {
  Register("dev-a");
  auto first = store_->RecordMeasurement(Measurement("k1", "dev-a", "w4a8-amx", 85.0, kT0), kT0);
  ASSERT_THAT(first, IsOk());
  auto retry = store_->RecordMeasurement(Measurement("k1", "dev-a", "w4a8-amx", 85.0, kT0),
                                         kT0 + absl::Seconds(5));
  ASSERT_THAT(retry, IsOk());
  EXPECT_TRUE(retry->duplicate);
  EXPECT_EQ(retry->measurement_id, first->measurement_id);
  EXPECT_THAT(*store_->ListMeasurements(absl::InfinitePast()), SizeIs(1));
}

TEST_P(StoreConformance, MeasurementFromAnUnknownDeviceIsNotFound) {
  EXPECT_THAT(store_->RecordMeasurement(Measurement("k1", "ghost", "w4a8-amx", 85.0, kT0), kT0),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("device_id \"ghost\"")));
  EXPECT_THAT(*store_->ListMeasurements(absl::InfinitePast()), SizeIs(0));
}

TEST_P(StoreConformance, InvalidMeasurementIsRefusedNamingTheField) {
  Register("dev-a");
  v1::ReportMeasurementRequest request = Measurement("k1", "dev-a", "w4a8-amx", -1.0, kT0);
  EXPECT_THAT(store_->RecordMeasurement(request, kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("decode_tok_s")));
}

TEST_P(StoreConformance, RegressionIsRecordedOnTheMeasurementAndTheDevice) {
  Register("dev-a");
  const std::vector<PathExpectation> expectations = SeedExpectations();
  RegressionCheck check = [&](const StoredMeasurement& m) {
    return IsRegression(m, ExpectedFor(expectations, m.path, m.hardware_class), 0.8);
  };
  auto slow = store_->RecordMeasurement(Measurement("k1", "dev-a", "w4a8-amx", 40.0, kT0), kT0, check);
  ASSERT_THAT(slow, IsOk());
  EXPECT_TRUE(slow->regression.regression);
  EXPECT_THAT(slow->regression.reason, HasSubstr("86.6"));
  auto retry = store_->RecordMeasurement(Measurement("k1", "dev-a", "w4a8-amx", 40.0, kT0), kT0, check);
  ASSERT_THAT(retry, IsOk());
  EXPECT_TRUE(retry->regression.regression);  // the retry reports what was recorded
  auto device = store_->GetDevice("dev-a");
  ASSERT_THAT(device, IsOk());
  EXPECT_EQ(device->regression_count(), 1u);
  EXPECT_THAT(device->last_regression(), HasSubstr("decode_tok_s 40.0"));
  // A later resolve refreshes the registry without losing the regression count.
  Register("dev-a", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0 + absl::Hours(1));
  EXPECT_EQ(store_->GetDevice("dev-a")->regression_count(), 1u);
}

TEST_P(StoreConformance, VerificationMatrixIsRebuiltFromTheFleet) {
  // A policy that does not vouch for x86 itself: only fleet evidence counts.
  const std::vector<PathExpectation> expectations = SeedExpectations(/*x86_policy_verified=*/false);
  VerificationConfig config;  // 3 devices, 7 days, 0.8
  for (int i = 0; i < 3; ++i) Register(absl::StrCat("amx-", i));
  const absl::Time now = kT0 + absl::Hours(1);
  ASSERT_THAT(store_->RecordMeasurement(Measurement("m0", "amx-0", "w4a8-amx", 86.0, kT0), now), IsOk());
  ASSERT_THAT(store_->RecordMeasurement(Measurement("m1", "amx-1", "w4a8-amx", 84.5, kT0), now), IsOk());
  auto matrix = store_->VerificationMatrix(expectations, config, now);
  ASSERT_THAT(matrix, IsOk());
  ASSERT_THAT(*matrix, SizeIs(1));
  EXPECT_FALSE((*matrix)[0].verified());
  EXPECT_EQ((*matrix)[0].device_count(), 2u);

  ASSERT_THAT(store_->RecordMeasurement(Measurement("m2", "amx-2", "w4a8-amx", 88.0, kT0), now), IsOk());
  matrix = store_->VerificationMatrix(expectations, config, now);
  ASSERT_THAT(matrix, IsOk());
  ASSERT_THAT(*matrix, SizeIs(1));
  const v1::VerificationCell& cell = (*matrix)[0];
  EXPECT_TRUE(cell.verified());
  EXPECT_EQ(cell.verification().source(), v1::Verification::SOURCE_FLEET);
  EXPECT_EQ(cell.verification().device_count(), 3u);
  EXPECT_EQ(cell.decode_tok_s().median(), 86.0);
  EXPECT_EQ(cell.decode_tok_s().min(), 84.5);
  EXPECT_EQ(cell.decode_tok_s().max(), 88.0);
  EXPECT_EQ(cell.fidelity_exact_matches(), 3u);
  EXPECT_EQ(cell.fidelity_prompts(), 36u);
  // Past the window the evidence expires.
  auto later = store_->VerificationMatrix(expectations, config, kT0 + absl::Hours(8 * 24));
  ASSERT_THAT(later, IsOk());
  EXPECT_THAT(*later, SizeIs(0));
}

// --- Rollouts ----------------------------------------------------------------

v1::Rollout MakeRollout(const std::string& id, absl::Time created_at) {
  v1::Rollout rollout;
  rollout.set_id(id);
  rollout.set_description("agentic devices onto fidelity");
  (*rollout.mutable_selector()->mutable_match_labels())["workload"] = "agentic";
  rollout.mutable_action()->set_set_priority(v1::PRIORITY_FIDELITY);
  for (uint32_t percent : {1u, 10u, 50u, 100u}) {
    v1::RolloutStage* stage = rollout.add_stages();
    stage->set_percent(percent);
    stage->set_min_bake_seconds(600);
  }
  rollout.set_state(v1::ROLLOUT_STATE_PROGRESSING);
  *rollout.mutable_created_at() = ToTimestamp(created_at);
  return rollout;
}

TEST_P(StoreConformance, RolloutCreateGetListAndDuplicate) {
  auto revision = store_->CreateRollout(MakeRollout("r-b", kT0));
  ASSERT_THAT(revision, IsOk());
  EXPECT_EQ(*revision, 1);
  ASSERT_THAT(store_->CreateRollout(MakeRollout("r-a", kT0 + absl::Seconds(1))), IsOk());
  EXPECT_THAT(store_->CreateRollout(MakeRollout("r-b", kT0)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("r-b")));
  auto stored = store_->GetRollout("r-b");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->revision, 1);
  EXPECT_EQ(stored->rollout.SerializeAsString(), MakeRollout("r-b", kT0).SerializeAsString());
  auto all = store_->ListRollouts();
  ASSERT_THAT(all, IsOk());
  ASSERT_THAT(*all, SizeIs(2));
  EXPECT_EQ((*all)[0].rollout.id(), "r-b");  // created first
  EXPECT_THAT(store_->GetRollout("nope"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
  EXPECT_THAT(store_->CreateRollout(v1::Rollout{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rollout.id")));
}

TEST_P(StoreConformance, RolloutUpdateRefusesAStaleRevision) {
  ASSERT_THAT(store_->CreateRollout(MakeRollout("r", kT0)), IsOk());
  v1::Rollout advanced = MakeRollout("r", kT0);
  advanced.set_current_stage(1);
  auto revision = store_->UpdateRollout(advanced, 1);
  ASSERT_THAT(revision, IsOk());
  EXPECT_EQ(*revision, 2);
  v1::Rollout paused = MakeRollout("r", kT0);
  paused.set_state(v1::ROLLOUT_STATE_PAUSED);
  EXPECT_THAT(store_->UpdateRollout(paused, 1),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("revision 2")));
  EXPECT_EQ(store_->GetRollout("r")->rollout.current_stage(), 1u);
  EXPECT_THAT(store_->UpdateRollout(MakeRollout("other", kT0), 1),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("other")));
}

TEST_P(StoreConformance, ConcurrentRolloutUpdatesFromOneRevisionHaveOneWinner) {
  ASSERT_THAT(store_->CreateRollout(MakeRollout("r", kT0)), IsOk());
  auto second = OpenFleetStore(url_);  // a second writer, as another replica would be
  ASSERT_THAT(second, IsOk());
  std::atomic<int> won{0}, aborted{0};
  auto update = [&](FleetStore* store, uint32_t stage) {
    v1::Rollout rollout = MakeRollout("r", kT0);
    rollout.set_current_stage(stage);
    absl::StatusOr<int64_t> result = store->UpdateRollout(rollout, 1);
    if (result.ok()) ++won;
    if (result.status().code() == absl::StatusCode::kAborted) ++aborted;
  };
  std::thread a(update, store_.get(), 1u);
  std::thread b(update, second->get(), 2u);
  a.join();
  b.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(aborted.load(), 1);
  EXPECT_EQ(store_->GetRollout("r")->revision, 2);
}

TEST_P(StoreConformance, RolloutDeleteComparesTheRevisionAndFreesTheId) {
  ASSERT_THAT(store_->CreateRollout(MakeRollout("r", kT0)), IsOk());
  v1::Rollout aborted = MakeRollout("r", kT0);
  aborted.set_state(v1::ROLLOUT_STATE_ABORTED);
  ASSERT_THAT(store_->UpdateRollout(aborted, 1), IsOkAndHolds(2));
  EXPECT_THAT(store_->DeleteRollout("r", 1),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("revision 2")));
  ASSERT_THAT(store_->DeleteRollout("r", 2), IsOk());
  EXPECT_THAT(store_->GetRollout("r"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->DeleteRollout("r", 2), StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"r\"")));
  EXPECT_THAT(store_->DeleteRollout("", 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rollout.id")));
  EXPECT_THAT(store_->CreateRollout(MakeRollout("r", kT0 + absl::Hours(1))), IsOkAndHolds(1));
  EXPECT_THAT(store_->ListRollouts(), IsOkAndHolds(SizeIs(1)));
}

// Revisions of a reused id count from 1 again, so a writer still holding
// the deleted rollout at revision 1 must not overwrite the new one.
TEST_P(StoreConformance, AWriteReadFromADeletedRolloutMissesTheNewOneUnderItsId) {
  ASSERT_THAT(store_->CreateRollout(MakeRollout("r", kT0)), IsOk());
  ASSERT_THAT(store_->DeleteRollout("r", 1), IsOk());
  ASSERT_THAT(store_->CreateRollout(MakeRollout("r", kT0 + absl::Hours(1))), IsOk());
  v1::Rollout stale = MakeRollout("r", kT0);
  stale.set_current_stage(3);
  EXPECT_THAT(store_->UpdateRollout(stale, 1),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("deleted and created again")));
  EXPECT_EQ(store_->GetRollout("r")->rollout.current_stage(), 0u);
  EXPECT_THAT(store_->UpdateRollout(MakeRollout("r", kT0 + absl::Hours(1)), 1), IsOkAndHolds(2));
}

// --- Outcomes ----------------------------------------------------------------

v1::ReportOutcomeRequest Outcome(const std::string& key, const std::string& device,
                                 v1::Outcome outcome, absl::Time observed_at) {
  v1::ReportOutcomeRequest request;
  request.set_idempotency_key(key);
  request.set_device_id(device);
  request.set_outcome(outcome);
  request.set_rollout_id("r");
  request.set_path("w4a16-tinygemm");
  *request.mutable_observed_at() = ToTimestamp(observed_at);
  return request;
}

TEST_P(StoreConformance, OutcomesAreIdempotentAndFoldPerDevice) {
  ASSERT_THAT(store_->RecordOutcome(Outcome("o1", "a", v1::OUTCOME_BOOT_OK, kT0), kT0), IsOk());
  auto duplicate = store_->RecordOutcome(Outcome("o1", "a", v1::OUTCOME_BOOT_OK, kT0), kT0);
  ASSERT_THAT(duplicate, IsOk());
  EXPECT_TRUE(*duplicate);
  ASSERT_THAT(store_->RecordOutcome(
                  Outcome("o2", "a", v1::OUTCOME_ENGINE_STARTED, kT0 + absl::Seconds(10)), kT0),
              IsOk());
  v1::ReportOutcomeRequest tasks = Outcome("o3", "a", v1::OUTCOME_TASKS, kT0 + absl::Seconds(20));
  tasks.set_tasks_completed(5);
  tasks.set_tasks_undone(1);
  ASSERT_THAT(store_->RecordOutcome(tasks, kT0), IsOk());
  tasks.set_idempotency_key("o4");
  tasks.set_tasks_completed(2);
  tasks.set_tasks_undone(0);
  tasks.set_tasks_failed(1);
  ASSERT_THAT(store_->RecordOutcome(tasks, kT0), IsOk());
  ASSERT_THAT(store_->RecordOutcome(Outcome("o5", "b", v1::OUTCOME_ENGINE_START_FAILED, kT0), kT0),
              IsOk());
  v1::ReportOutcomeRequest elsewhere = Outcome("o6", "c", v1::OUTCOME_BOOT_OK, kT0);
  elsewhere.set_rollout_id("other");
  ASSERT_THAT(store_->RecordOutcome(elsewhere, kT0), IsOk());

  auto outcomes = store_->LatestOutcomes("r");
  ASSERT_THAT(outcomes, IsOk());
  ASSERT_THAT(*outcomes, SizeIs(2));
  const DeviceOutcomes& a = (*outcomes)[0];
  EXPECT_EQ(a.device_id, "a");
  EXPECT_EQ(a.latest_outcome, v1::OUTCOME_ENGINE_STARTED);
  EXPECT_TRUE(a.engine_started);
  EXPECT_EQ(a.tasks_completed, 7u);
  EXPECT_EQ(a.tasks_undone, 1u);
  EXPECT_EQ(a.tasks_failed, 1u);
  EXPECT_EQ(a.reports, 4u);
  EXPECT_EQ(a.last_report_at, kT0 + absl::Seconds(20));
  EXPECT_EQ((*outcomes)[1].latest_outcome, v1::OUTCOME_ENGINE_START_FAILED);
  EXPECT_FALSE((*outcomes)[1].engine_started);
  EXPECT_THAT(*store_->LatestOutcomes(""), SizeIs(3));
  EXPECT_THAT(store_->RecordOutcome(Outcome("o7", "a", v1::OUTCOME_UNSPECIFIED, kT0), kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outcome")));
}

// --- Running vs assigned ----------------------------------------------------

v1::ReportOutcomeRequest RunningReport(const std::string& key, const std::string& device,
                                       v1::Outcome outcome, const std::string& running_path,
                                       absl::Time observed_at) {
  v1::ReportOutcomeRequest request = Outcome(key, device, outcome, observed_at);
  request.clear_rollout_id();
  v1::RunningBuild* running = request.mutable_running();
  if (running_path.empty()) {
    running->set_nothing_running(true);
  } else {
    running->set_path(running_path);
    running->set_model("Spark-X2.5-1.7B");
    running->set_artifact_sha256(std::string(64, 'a'));
    running->set_decision_etag("etag-" + running_path);
    running->set_source(v1::BOOT_SOURCE_SERVER);
  }
  return request;
}

TEST_P(StoreConformance, WhatADeviceRunsIsKeptBesideItsAssignmentAndDriftIsJudged) {
  Register("dev-a", "x86_cpu", "w4a16-tinygemm", kSeedCpuAsProbed, kT0);
  Register("dev-b", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0);
  Register("dev-c", "x86_cpu", "w4a8-amx", kSeedCpuAsProbed, kT0);
  EXPECT_FALSE(store_->GetDevice("dev-a")->has_running()) << "no report yet: not judged";
  EXPECT_FALSE(store_->GetDevice("dev-a")->has_drift());

  // dev-a was given tinygemm, could not start it and went back to amx.
  const absl::Time rolled_back = kT0 + absl::Minutes(10);
  ASSERT_THAT(store_->RecordOutcome(RunningReport("a1", "dev-a", v1::OUTCOME_ROLLED_BACK,
                                                  "w4a8-amx", rolled_back),
                                    rolled_back),
              IsOk());
  ASSERT_THAT(store_->RecordOutcome(RunningReport("b1", "dev-b", v1::OUTCOME_ENGINE_STARTED,
                                                  "w4a8-amx", kT0),
                                    kT0),
              IsOk());
  absl::StatusOr<v1::Device> a = store_->GetDevice("dev-a");
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->path(), "w4a16-tinygemm") << "the assignment stays what the server said";
  EXPECT_EQ(a->running().path(), "w4a8-amx");
  EXPECT_EQ(a->running().decision_etag(), "etag-w4a8-amx");
  EXPECT_EQ(FromProtoTime(a->running_since()), rolled_back);
  EXPECT_EQ(a->drift().reason(), "rolled_back");
  EXPECT_EQ(FromProtoTime(a->drift().since()), rolled_back);
  EXPECT_FALSE(store_->GetDevice("dev-b")->has_drift()) << "runs its assignment";
  EXPECT_EQ(store_->GetDevice("dev-b")->running().path(), "w4a8-amx");

  // The same build reported again keeps its since, whatever the device's
  // clock says: one dated in 2100, then one from a clock reset to 1970 (a
  // board booting before NTP). The last received wins.
  const absl::Time retried = kT0 + absl::Minutes(70);
  ASSERT_THAT(store_->RecordOutcome(RunningReport("a2", "dev-a", v1::OUTCOME_ROLLED_BACK,
                                                  "w4a8-amx", absl::FromUnixSeconds(4'102'444'800)),
                                    kT0 + absl::Minutes(60)),
              IsOk());
  ASSERT_THAT(store_->RecordOutcome(RunningReport("a0", "dev-a", v1::OUTCOME_ROLLED_BACK,
                                                  "w4a8-amx", absl::FromUnixSeconds(60)),
                                    retried),
              IsOk());
  a = store_->GetDevice("dev-a");
  EXPECT_EQ(a->running().path(), "w4a8-amx");
  EXPECT_EQ(FromProtoTime(a->running_since()), rolled_back);
  EXPECT_EQ(FromProtoTime(a->running_reported_at()), retried) << "not frozen by the 2100 report";

  DeviceQuery drifted;
  drifted.drifted_only = true;
  absl::StatusOr<DevicePage> listed = store_->ListDevices(drifted);
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->devices.size(), 1u);
  EXPECT_EQ(listed->devices[0].device_id(), "dev-a");
  EXPECT_EQ(listed->devices[0].drift().reason(), "rolled_back");

  absl::StatusOr<RunningCounts> counts =
      store_->CountRunning(kT0 - absl::Hours(1), kT0 + absl::Minutes(30));
  ASSERT_THAT(counts, IsOk());
  // dev-c has not said what it runs: only the devices that did are counted.
  EXPECT_EQ(counts->by_class_and_running_path,
            (std::map<std::pair<std::string, std::string>, uint64_t>{{{"x86_cpu", "w4a8-amx"}, 2}}));
  ASSERT_EQ(counts->drifted.size(), 1u);
  const DriftCount& rolled = counts->drifted.at({"x86_cpu", "rolled_back"});
  EXPECT_EQ(rolled.devices, 1u);
  EXPECT_EQ(rolled.persistent, 1u) << "drifting since before persistent_before";
  EXPECT_EQ(store_->CountRunning(kT0 - absl::Hours(1), kT0)->drifted.at({"x86_cpu", "rolled_back"})
                .persistent,
            0u);

  // It converges: nothing drifts.
  const absl::Time started = kT0 + absl::Minutes(90);
  ASSERT_THAT(store_->RecordOutcome(RunningReport("a3", "dev-a", v1::OUTCOME_ENGINE_STARTED,
                                                  "w4a16-tinygemm", started),
                                    started),
              IsOk());
  EXPECT_FALSE(store_->GetDevice("dev-a")->has_drift());
  EXPECT_THAT(store_->ListDevices(drifted)->devices, SizeIs(0));

  // A new assignment the device has not acted on yet is pending from the
  // resolve that made it; an engine that cannot start at all runs nothing.
  const absl::Time reassigned = kT0 + absl::Minutes(100);
  ASSERT_THAT(store_->UpsertDevices(
                  {MakeDevice("dev-a", "x86_cpu", "bf16", kSeedCpuAsProbed, reassigned)}),
              IsOk());
  a = store_->GetDevice("dev-a");
  EXPECT_EQ(a->drift().reason(), "pending");
  EXPECT_EQ(FromProtoTime(a->drift().since()), reassigned);
  ASSERT_THAT(store_->RecordOutcome(RunningReport("a4", "dev-a", v1::OUTCOME_ENGINE_START_FAILED,
                                                  "", reassigned + absl::Minutes(1)),
                                    reassigned + absl::Minutes(1)),
              IsOk());
  a = store_->GetDevice("dev-a");
  EXPECT_TRUE(a->running().nothing_running());
  EXPECT_EQ(a->drift().reason(), "not_running");
  EXPECT_EQ(store_->ListDevices(drifted)->devices.size(), 1u);
}

TEST_P(StoreConformance, ARunningReportThatCannotBeComparedIsRefusedNamingTheField) {
  Register("dev-a");
  const auto refused = [&](const std::function<void(v1::RunningBuild&)>& spoil) {
    v1::ReportOutcomeRequest report =
        RunningReport("k", "dev-a", v1::OUTCOME_ENGINE_STARTED, "w4a8-amx", kT0);
    spoil(*report.mutable_running());
    return store_->RecordOutcome(report, kT0).status();
  };
  EXPECT_THAT(refused([](v1::RunningBuild& r) { r.set_path("w4a8\namx"); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("running.path")));
  EXPECT_THAT(refused([](v1::RunningBuild& r) { r.set_model(std::string(257, 'm')); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("running.model")));
  EXPECT_THAT(refused([](v1::RunningBuild& r) { r.set_artifact_sha256("ABC"); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("running.artifact_sha256")));
  EXPECT_THAT(refused([](v1::RunningBuild& r) { r.set_source(static_cast<v1::BootSource>(99)); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("running.source")));
  EXPECT_THAT(refused([](v1::RunningBuild& r) { r.set_nothing_running(true); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("running.nothing_running")));
  EXPECT_THAT(refused([](v1::RunningBuild& r) { r.clear_path(); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("running.path")));
  EXPECT_FALSE(store_->GetDevice("dev-a")->has_running()) << "nothing of a refused report is kept";

  // Fields this server does not know are not kept (they would ride along
  // in every listing page).
  v1::ReportOutcomeRequest padded =
      RunningReport("k2", "dev-a", v1::OUTCOME_ENGINE_STARTED, "w4a8-amx", kT0);
  padded.mutable_running()->GetReflection()->MutableUnknownFields(padded.mutable_running())
      ->AddLengthDelimited(99, std::string(60'000, 'x'));
  ASSERT_THAT(store_->RecordOutcome(padded, kT0), IsOk());
  absl::StatusOr<v1::Device> stored = store_->GetDevice("dev-a");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->running().path(), "w4a8-amx");
  EXPECT_LT(stored->running().ByteSizeLong(), 200u);
}

TEST_P(StoreConformance, TaskCountsSumPast32Bits) {
  v1::ReportOutcomeRequest tasks = Outcome("t1", "a", v1::OUTCOME_TASKS, kT0);
  tasks.set_tasks_completed(4294967295u);
  tasks.set_tasks_undone(4294967295u);
  ASSERT_THAT(store_->RecordOutcome(tasks, kT0), IsOk());
  tasks.set_idempotency_key("t2");
  ASSERT_THAT(store_->RecordOutcome(tasks, kT0), IsOk());
  auto outcomes = store_->LatestOutcomes("r");
  ASSERT_THAT(outcomes, IsOk());
  ASSERT_THAT(*outcomes, SizeIs(1));
  EXPECT_EQ((*outcomes)[0].tasks_completed, 2 * uint64_t{4294967295u});
  EXPECT_EQ((*outcomes)[0].tasks_undone, 2 * uint64_t{4294967295u});
}

// Outcomes are keyed by the rollout id an agent reports; a deleted
// rollout's stay in the table, and a new rollout under the same id starts
// with none of them in its counts.
TEST_P(StoreConformance, ANewRolloutUnderADeletedOnesIdInheritsNoOutcomes) {
  ASSERT_THAT(store_->CreateRollout(MakeRollout("r", kT0)), IsOk());
  ASSERT_THAT(store_->RecordOutcome(Outcome("old-1", "a", v1::OUTCOME_ENGINE_START_FAILED, kT0),
                                    kT0 + absl::Minutes(1)),
              IsOk());
  ASSERT_THAT(store_->RecordOutcome(Outcome("old-2", "b", v1::OUTCOME_BOOT_FAILED, kT0),
                                    kT0 + absl::Minutes(2)),
              IsOk());
  ASSERT_THAT(store_->DeleteRollout("r", 1), IsOk());
  EXPECT_THAT(store_->LatestOutcomes("r"), IsOkAndHolds(SizeIs(2))) << "the history stays";

  const absl::Time reused = kT0 + absl::Hours(1);
  ASSERT_THAT(store_->CreateRollout(MakeRollout("r", reused)), IsOk());
  EXPECT_THAT(store_->LatestOutcomes("r"), IsOkAndHolds(SizeIs(0)));
  EXPECT_THAT(store_->LatestOutcomes(""), IsOkAndHolds(SizeIs(0)));
  ASSERT_THAT(store_->RecordOutcome(Outcome("new-1", "a", v1::OUTCOME_ENGINE_STARTED, reused),
                                    reused + absl::Minutes(1)),
              IsOk());
  auto outcomes = store_->LatestOutcomes("r");
  ASSERT_THAT(outcomes, IsOk());
  ASSERT_THAT(*outcomes, SizeIs(1));
  EXPECT_EQ((*outcomes)[0].device_id, "a");
  EXPECT_EQ((*outcomes)[0].latest_outcome, v1::OUTCOME_ENGINE_STARTED);
  EXPECT_EQ((*outcomes)[0].reports, 1u) << "the old rollout's report is not folded in";
}

// --- Idempotency keys are each device's own -----------------------------------

TEST_P(StoreConformance, AnotherDevicesMeasurementKeyIsNoDuplicate) {
  Register("victim");
  Register("attacker");
  // The attacker sends first, with the key the victim will use.
  auto stolen = store_->RecordMeasurement(Measurement("k1", "attacker", "w4a8-amx", 1.0, kT0), kT0);
  ASSERT_THAT(stolen, IsOk());
  auto real = store_->RecordMeasurement(Measurement("k1", "victim", "w4a8-amx", 85.0, kT0), kT0);
  ASSERT_THAT(real, IsOk());
  EXPECT_FALSE(real->duplicate);
  EXPECT_NE(real->measurement_id, stolen->measurement_id);
  // The victim's own retry is still recognised.
  auto retried = store_->RecordMeasurement(Measurement("k1", "victim", "w4a8-amx", 85.0, kT0), kT0);
  ASSERT_THAT(retried, IsOk());
  EXPECT_TRUE(retried->duplicate);
  EXPECT_EQ(retried->measurement_id, real->measurement_id);
  auto rows = store_->ListMeasurements(absl::InfinitePast());
  ASSERT_THAT(rows, IsOk());
  ASSERT_THAT(*rows, SizeIs(2));
  std::set<std::pair<std::string, double>> stored;
  for (const StoredMeasurement& m : *rows) stored.emplace(m.device_id, m.decode_tok_s);
  EXPECT_EQ(stored, (std::set<std::pair<std::string, double>>{{"attacker", 1.0}, {"victim", 85.0}}));
}

TEST_P(StoreConformance, AnotherDevicesOutcomeKeyIsNoDuplicate) {
  ASSERT_THAT(store_->RecordOutcome(Outcome("o1", "attacker", v1::OUTCOME_BOOT_FAILED, kT0), kT0),
              IsOkAndHolds(false));
  EXPECT_THAT(store_->RecordOutcome(Outcome("o1", "victim", v1::OUTCOME_ENGINE_STARTED, kT0), kT0),
              IsOkAndHolds(false));
  EXPECT_THAT(store_->RecordOutcome(Outcome("o1", "victim", v1::OUTCOME_ENGINE_STARTED, kT0), kT0),
              IsOkAndHolds(true));
  auto outcomes = store_->LatestOutcomes("r");
  ASSERT_THAT(outcomes, IsOk());
  ASSERT_THAT(*outcomes, SizeIs(2));
  EXPECT_EQ((*outcomes)[1].device_id, "victim");
  EXPECT_EQ((*outcomes)[1].latest_outcome, v1::OUTCOME_ENGINE_STARTED);
}

// GetDevice's view of one device's own reports: newest received first (the
// server's clock, whatever time the device claims), at most the limit of
// each, every stored field carried, no other device's rows.
TEST_P(StoreConformance, RecentDeviceReportsAreTheDevicesOwnNewestReceivedFirst) {
  Register("dev-a");
  Register("dev-b");
  for (int i = 0; i < 4; ++i) {
    // measured_at runs backwards: a device's clock does not order its reports.
    ASSERT_THAT(store_->RecordMeasurement(
                    Measurement(absl::StrCat("m", i), "dev-a", "w4a8-amx", 80.0 + i,
                                kT0 - absl::Hours(i)),
                    kT0 + absl::Seconds(i),
                    [i](const StoredMeasurement&) {
                      RegressionVerdict verdict;
                      if (i == 3) {
                        verdict.regression = true;
                        verdict.reason = "decode below 0.8 of expected";
                      }
                      return verdict;
                    }),
                IsOk());
    v1::ReportOutcomeRequest outcome =
        Outcome(absl::StrCat("o", i), "dev-a", i == 3 ? v1::OUTCOME_TASKS : v1::OUTCOME_BOOT_OK,
                kT0 - absl::Hours(i));
    outcome.set_artifact_sha256(std::string(64, 'a' + i));
    outcome.set_policy_version(absl::StrCat("sha256:p", i));
    outcome.set_detail(absl::StrCat("boot ", i));
    if (i == 3) {
      outcome.set_tasks_completed(5);
      outcome.set_tasks_undone(1);
      outcome.set_tasks_failed(2);
    }
    ASSERT_THAT(store_->RecordOutcome(outcome, kT0 + absl::Seconds(i)), IsOk());
  }
  ASSERT_THAT(store_->RecordMeasurement(Measurement("m0", "dev-b", "w4a8-amx", 1.0, kT0),
                                        kT0 + absl::Minutes(1)),
              IsOk());
  ASSERT_THAT(store_->RecordOutcome(Outcome("o0", "dev-b", v1::OUTCOME_BOOT_FAILED, kT0),
                                    kT0 + absl::Minutes(1)),
              IsOk());

  auto reports = store_->RecentDeviceReports("dev-a", 3);
  ASSERT_THAT(reports, IsOk());
  ASSERT_THAT(reports->measurements, SizeIs(3));
  ASSERT_THAT(reports->outcomes, SizeIs(3));
  const v1::DeviceMeasurement& newest = reports->measurements[0];
  EXPECT_EQ(newest.decode_tok_s(), 83.0);
  EXPECT_EQ(reports->measurements[1].decode_tok_s(), 82.0);
  EXPECT_EQ(reports->measurements[2].decode_tok_s(), 81.0);
  EXPECT_FALSE(newest.measurement_id().empty());
  EXPECT_EQ(newest.model(), "Spark-X2.5-1.7B");
  EXPECT_EQ(newest.path(), "w4a8-amx");
  EXPECT_EQ(newest.engine_version(), "vllm 0.28");
  EXPECT_EQ(newest.prefill_tok_s(), 900);
  EXPECT_EQ(newest.gemm_ms_per_step(), 5.91);
  EXPECT_EQ(newest.step_ms(), 11.55);
  EXPECT_EQ(newest.threads(), 24u);
  EXPECT_EQ(newest.fidelity_exact_matches(), 1u);
  EXPECT_EQ(newest.fidelity_prompts(), 12u);
  EXPECT_TRUE(newest.regression());
  EXPECT_EQ(newest.regression_reason(), "decode below 0.8 of expected");
  EXPECT_FALSE(reports->measurements[1].regression());
  EXPECT_EQ(FromProtoTime(newest.measured_at()), kT0 - absl::Hours(3));
  EXPECT_EQ(FromProtoTime(newest.received_at()), kT0 + absl::Seconds(3));

  const v1::DeviceOutcome& latest = reports->outcomes[0];
  EXPECT_EQ(latest.outcome(), v1::OUTCOME_TASKS);
  EXPECT_EQ(latest.path(), "w4a16-tinygemm");
  EXPECT_EQ(latest.artifact_sha256(), std::string(64, 'd'));
  EXPECT_EQ(latest.policy_version(), "sha256:p3");
  EXPECT_EQ(latest.rollout_id(), "r");
  EXPECT_EQ(latest.tasks_completed(), 5u);
  EXPECT_EQ(latest.tasks_undone(), 1u);
  EXPECT_EQ(latest.tasks_failed(), 2u);
  EXPECT_EQ(latest.detail(), "boot 3");
  EXPECT_EQ(FromProtoTime(latest.observed_at()), kT0 - absl::Hours(3));
  EXPECT_EQ(FromProtoTime(latest.received_at()), kT0 + absl::Seconds(3));
  EXPECT_EQ(reports->outcomes[1].outcome(), v1::OUTCOME_BOOT_OK);
  EXPECT_EQ(reports->outcomes[1].detail(), "boot 2");
  EXPECT_EQ(reports->outcomes[2].detail(), "boot 1");

  auto all = store_->RecentDeviceReports("dev-a", kRecentDeviceReports);
  ASSERT_THAT(all, IsOk());
  EXPECT_THAT(all->measurements, SizeIs(4));
  EXPECT_THAT(all->outcomes, SizeIs(4));
  auto other = store_->RecentDeviceReports("dev-b", kRecentDeviceReports);
  ASSERT_THAT(other, IsOk());
  ASSERT_THAT(other->measurements, SizeIs(1));
  EXPECT_EQ(other->measurements[0].decode_tok_s(), 1.0);
  ASSERT_THAT(other->outcomes, SizeIs(1));
  EXPECT_EQ(other->outcomes[0].outcome(), v1::OUTCOME_BOOT_FAILED);
  auto unknown = store_->RecentDeviceReports("nobody", kRecentDeviceReports);
  ASSERT_THAT(unknown, IsOk());
  EXPECT_THAT(unknown->measurements, SizeIs(0));
  EXPECT_THAT(unknown->outcomes, SizeIs(0));
  EXPECT_THAT(store_->RecentDeviceReports("dev-a", 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limit")));
  EXPECT_THAT(store_->RecentDeviceReports("dev-a", kMaxRecentDeviceReports + 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limit")));
  // The registry record itself carries none: only the GetDevice RPC fills them.
  auto device = store_->GetDevice("dev-a");
  ASSERT_THAT(device, IsOk());
  EXPECT_THAT(device->recent_measurements(), SizeIs(0));
}

TEST_P(StoreConformance, ReportsStoredBySchemaVersion4KeepTheirKeysPerDevice) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
  ASSERT_THAT(url, IsOk());
  {
    auto database = OpenSqlDatabase(*url);
    ASSERT_THAT(database, IsOk());
    ASSERT_THAT(ApplyMigrations(**database, 4), IsOkAndHolds(4));
    auto session = (*database)->Acquire();
    ASSERT_THAT(session, IsOk());
    // A row as version 4 wrote it, numbered 7 as if earlier rows had been.
    const std::string explicit_id =
        GetParam() == Backend::kPostgres ? "OVERRIDING SYSTEM VALUE " : "";
    ASSERT_THAT((*session)
                    ->Query(absl::StrCat(
                                "INSERT INTO measurements (id, idempotency_key, device_id, "
                                "hardware_class, cpu_model, model, path, engine_version, "
                                "decode_tok_s, prefill_tok_s, gemm_ms_per_step, step_ms, threads, "
                                "fidelity_exact_matches, fidelity_prompts, measured_at_us, "
                                "received_at_us, regression, regression_reason) ",
                                explicit_id,
                                "VALUES (7, 'k1', 'dev-a', 'x86_cpu', 'cpu', 'm', 'w4a8-amx', "
                                "'e', 80, 0, 0, 0, 24, 1, 12, $1, $1, 0, '')"),
                            {ToMicros(kT0)})
                    .status(),
                IsOk());
    if (GetParam() == Backend::kPostgres) {
      // Where the identity would stand had it numbered the row itself.
      ASSERT_THAT((*session)
                      ->Query("SELECT setval(pg_get_serial_sequence('measurements', 'id'), 7)")
                      .status(),
                  IsOk());
    }
    ASSERT_THAT((*session)
                    ->Query("INSERT INTO outcomes (idempotency_key, device_id, rollout_id, "
                            "outcome, path, artifact_sha256, policy_version, tasks_completed, "
                            "tasks_undone, tasks_failed, detail, observed_at_us, received_at_us) "
                            "VALUES ('o1', 'dev-a', 'r', $1, 'p', '', '', 0, 0, 0, 'kept', $2, $2)",
                            {int64_t{v1::OUTCOME_ENGINE_STARTED}, ToMicros(kT0)})
                    .status(),
                IsOk());
  }
  auto upgraded = OpenFleetStore(*url);
  ASSERT_THAT(upgraded, IsOk());
  EXPECT_EQ((*upgraded)->schema_version(), LatestSchemaVersion());
  ASSERT_THAT((*upgraded)->UpsertDevices({MakeDevice("dev-a", "x86_cpu", "w4a8-amx", "cpu", kT0),
                                          MakeDevice("dev-b", "x86_cpu", "w4a8-amx", "cpu", kT0)}),
              IsOk());

  // The carried-over rows: still there, still their device's duplicates.
  auto rows = (*upgraded)->ListMeasurements(absl::InfinitePast());
  ASSERT_THAT(rows, IsOk());
  ASSERT_THAT(*rows, SizeIs(1));
  EXPECT_EQ((*rows)[0].measurement_id, "7");
  auto again = (*upgraded)->RecordMeasurement(Measurement("k1", "dev-a", "w4a8-amx", 80, kT0), kT0);
  ASSERT_THAT(again, IsOk());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->measurement_id, "7");
  // The same key from another device is a new report, numbered after the
  // carried-over rows.
  auto other = (*upgraded)->RecordMeasurement(Measurement("k1", "dev-b", "w4a8-amx", 81, kT0), kT0);
  ASSERT_THAT(other, IsOk());
  EXPECT_FALSE(other->duplicate);
  int64_t other_id = 0;
  ASSERT_TRUE(absl::SimpleAtoi(other->measurement_id, &other_id)) << other->measurement_id;
  EXPECT_GT(other_id, 7);
  EXPECT_THAT((*upgraded)->RecordOutcome(Outcome("o1", "dev-a", v1::OUTCOME_ENGINE_STARTED, kT0), kT0),
              IsOkAndHolds(true));
  EXPECT_THAT((*upgraded)->RecordOutcome(Outcome("o1", "dev-b", v1::OUTCOME_ENGINE_STARTED, kT0), kT0),
              IsOkAndHolds(false));
  auto outcomes = (*upgraded)->LatestOutcomes("r");
  ASSERT_THAT(outcomes, IsOk());
  ASSERT_THAT(*outcomes, SizeIs(2));
  EXPECT_EQ((*outcomes)[0].latest_detail, "kept");
}

// --- Devices by version ------------------------------------------------------

TEST_P(StoreConformance, DevicesAreCountedByPolicyAndAgentVersionWithinTheWindow) {
  auto device = [](const std::string& id, const std::string& policy, const std::string& agent,
                   absl::Time seen) {
    v1::Device d = MakeDevice(id, "x86_cpu", "w4a8-amx", "cpu", seen);
    d.set_policy_version(policy);
    d.set_agent_version(agent);
    return d;
  };
  ASSERT_THAT(store_->UpsertDevices({device("a", "p2", "0.2.0", kT0), device("b", "p2", "0.1.0", kT0),
                                     device("c", "p1", "0.1.0", kT0),
                                     device("gone", "p0", "0.0.1", kT0 - absl::Hours(30))}),
              IsOk());
  auto counts = store_->CountDevicesByVersion(kT0 - absl::Hours(24));
  ASSERT_THAT(counts, IsOk());
  using Counts = std::map<std::string, uint64_t>;
  EXPECT_EQ(counts->by_policy_version, (Counts{{"p1", 1}, {"p2", 2}}));
  EXPECT_EQ(counts->by_agent_version, (Counts{{"0.1.0", 2}, {"0.2.0", 1}}));

  // A device that moved to the new policy is counted there alone; a bump of
  // an unchanged record keeps its versions.
  ASSERT_THAT(store_->UpsertDevices({device("c", "p2", "0.2.0", kT0 + absl::Minutes(1)),
                                     device("a", "p2", "0.2.0", kT0 + absl::Minutes(1))}),
              IsOk());
  counts = store_->CountDevicesByVersion(kT0 - absl::Hours(24));
  ASSERT_THAT(counts, IsOk());
  EXPECT_EQ(counts->by_policy_version, (Counts{{"p2", 3}}));
  EXPECT_EQ(counts->by_agent_version, (Counts{{"0.1.0", 1}, {"0.2.0", 2}}));
  EXPECT_THAT(RecordedAt(url_, "a"), IsOkAndHolds(ToMicros(kT0)));
}

// A device record as schema `version` (5 or later) wrote it, in a database
// migrated only that far: the columns of that time, the fingerprint of the
// record.
absl::Status StoreAsSchemaVersion(const std::string& url, int version,
                                  const EncodedDevice& encoded) {
  ASSIGN_OR_RETURN(std::unique_ptr<SqlDatabase> database, OpenSqlDatabase(url));
  RETURN_IF_ERROR(ApplyMigrations(*database, version).status());
  ASSIGN_OR_RETURN(std::unique_ptr<SqlSession> session, database->Acquire());
  RETURN_IF_ERROR(session
                      ->Query("INSERT INTO devices (device_id, hardware_class, path, cpu_model, "
                              "first_seen_us, recorded_us, body) VALUES ($1, $2, $3, $4, $5, $5, $6)",
                              {encoded.device_id, encoded.hardware_class, encoded.path,
                               encoded.cpu_model, encoded.last_seen_us, SqlBlob{encoded.body}})
                      .status());
  return session
      ->Query("INSERT INTO device_sightings (device_id, hardware_class, path, last_seen_us, "
              "record_hash) VALUES ($1, $2, $3, $4, $5)",
              {encoded.device_id, encoded.hardware_class, encoded.path, encoded.last_seen_us,
               encoded.fingerprint})
      .status();
}

TEST_P(StoreConformance, DevicesStoredBySchemaVersion5GetTheirVersionsAtTheNextResolve) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
  ASSERT_THAT(url, IsOk());
  const v1::Device device = MakeDevice("dev-old", "x86_cpu", "w4a8-amx", "cpu", kT0);
  const EncodedDevice encoded = EncodeDevice(device);
  // As version 5 wrote it: the versions only inside the body, and a
  // fingerprint that matches the record.
  ASSERT_THAT(StoreAsSchemaVersion(*url, 5, encoded), IsOk());
  auto upgraded = OpenFleetStore(*url);
  ASSERT_THAT(upgraded, IsOk());
  EXPECT_EQ((*upgraded)->schema_version(), LatestSchemaVersion());
  using Counts = std::map<std::string, uint64_t>;
  auto counts = (*upgraded)->CountDevicesByVersion(kT0);
  ASSERT_THAT(counts, IsOk());
  EXPECT_EQ(counts->by_policy_version, (Counts{{"", 1}}));

  // The same record seen again is written whole once, versions included.
  v1::Device again = device;
  *again.mutable_last_seen() = ToTimestamp(kT0 + absl::Hours(1));
  ASSERT_THAT((*upgraded)->UpsertDevices({again}), IsOk());
  EXPECT_THAT(RecordedAt(*url, "dev-old"), IsOkAndHolds(ToMicros(kT0 + absl::Hours(1))));
  counts = (*upgraded)->CountDevicesByVersion(kT0);
  ASSERT_THAT(counts, IsOk());
  EXPECT_EQ(counts->by_policy_version, (Counts{{device.policy_version(), 1}}));
  EXPECT_EQ(counts->by_agent_version, (Counts{{device.agent_version(), 1}}));
  auto stored = (*upgraded)->GetDevice("dev-old");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->policy_version(), device.policy_version());

  // The audit trail starts empty on the upgraded store and takes events.
  auto events = (*upgraded)->ListAuditEvents(absl::InfinitePast(), 0);
  ASSERT_THAT(events, IsOk());
  EXPECT_THAT(events->events, SizeIs(0));
  v1::AuditEvent event;
  *event.mutable_time() = ToTimestamp(kT0);
  event.set_rpc("CreateRollout");
  EXPECT_THAT((*upgraded)->RecordAuditEvent(event), IsOk());
}

// Rows from before running reports were kept have no assigned_key: such a
// device is not judged until its next resolve rewrites its row.
TEST_P(StoreConformance, DevicesStoredBySchemaVersion8AreJudgedFromTheirNextResolve) {
  absl::StatusOr<std::string> url = FreshDatabaseUrl(GetParam());
  ASSERT_THAT(url, IsOk());
  const v1::Device device = MakeDevice("dev-old", "x86_cpu", "w4a16-tinygemm", "cpu", kT0);
  const EncodedDevice encoded = EncodeDevice(device);
  ASSERT_THAT(StoreAsSchemaVersion(*url, 8, encoded), IsOk());
  auto upgraded = OpenFleetStore(*url);
  ASSERT_THAT(upgraded, IsOk());
  ASSERT_THAT((*upgraded)->RecordOutcome(RunningReport("k1", "dev-old", v1::OUTCOME_ROLLED_BACK,
                                                       "w4a8-amx", kT0 + absl::Minutes(1)),
                                         kT0 + absl::Minutes(1)),
              IsOk());
  auto stored = (*upgraded)->GetDevice("dev-old");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->running().path(), "w4a8-amx");
  EXPECT_FALSE(stored->has_drift()) << "its assignment's build is not known yet";

  v1::Device again = device;
  *again.mutable_last_seen() = ToTimestamp(kT0 + absl::Hours(1));
  ASSERT_THAT((*upgraded)->UpsertDevices({again}), IsOk());
  stored = (*upgraded)->GetDevice("dev-old");
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(stored->drift().reason(), "pending") << "the resolve came after its last report";
  EXPECT_EQ(FromProtoTime(stored->drift().since()), kT0 + absl::Hours(1));
}

// --- Audit trail ---------------------------------------------------------------

v1::AuditEvent AuditEventAt(absl::Time time, const std::string& target) {
  v1::AuditEvent event;
  *event.mutable_time() = ToTimestamp(time);
  event.set_identity("olga");
  event.set_role("operator");
  event.set_rpc("PauseRollout");
  event.set_target(target);
  event.set_request_summary("id: \"" + target + "\" reason: \"why\"");
  event.set_result("PERMISSION_DENIED");
  event.set_message("needs role operator");
  event.set_replica("replica-1");
  return event;
}

TEST_P(StoreConformance, AuditEventsAreListedOldestFirstSinceATimeAndTheNewestKeptWhenTruncated) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_THAT(store_->RecordAuditEvent(AuditEventAt(kT0 + absl::Seconds(i), absl::StrCat("r", i))),
                IsOk());
  }
  // Two events in one microsecond keep the order they were recorded in.
  ASSERT_THAT(store_->RecordAuditEvent(AuditEventAt(kT0 + absl::Seconds(4), "r5")), IsOk());

  auto all = store_->ListAuditEvents(kT0 + absl::Seconds(1), 0);
  ASSERT_THAT(all, IsOk());
  EXPECT_FALSE(all->truncated);
  std::vector<std::string> targets;
  for (const v1::AuditEvent& event : all->events) targets.push_back(event.target());
  EXPECT_THAT(targets, ElementsAre("r1", "r2", "r3", "r4", "r5"));
  const v1::AuditEvent expected = AuditEventAt(kT0 + absl::Seconds(1), "r1");
  EXPECT_EQ(all->events[0].SerializeAsString(), expected.SerializeAsString())
      << all->events[0].DebugString();

  auto newest = store_->ListAuditEvents(absl::InfinitePast(), 2);
  ASSERT_THAT(newest, IsOk());
  EXPECT_TRUE(newest->truncated);
  ASSERT_THAT(newest->events, SizeIs(2));
  EXPECT_EQ(newest->events[0].target(), "r4");
  EXPECT_EQ(newest->events[1].target(), "r5");

  auto exact = store_->ListAuditEvents(absl::InfinitePast(), 6);
  ASSERT_THAT(exact, IsOk());
  EXPECT_FALSE(exact->truncated);
  EXPECT_THAT(exact->events, SizeIs(6));

  EXPECT_THAT(store_->ListAuditEvents(absl::InfinitePast(), kMaxAuditLimit + 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("limit"), HasSubstr("10000"))));
  v1::AuditEvent untimed = AuditEventAt(kT0, "r");
  untimed.clear_time();
  EXPECT_THAT(store_->RecordAuditEvent(untimed),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("time")));

  // Committed: another opener of the same database sees every event.
  store_.reset();
  auto reopened = OpenFleetStore(url_);
  ASSERT_THAT(reopened, IsOk());
  auto again = (*reopened)->ListAuditEvents(absl::InfinitePast(), 0);
  ASSERT_THAT(again, IsOk());
  EXPECT_THAT(again->events, SizeIs(6));
}

// Pages walk back in time without gaps or repeats, also across events of one
// microsecond, and a page stops at its byte bound (always one event at least).
TEST_P(StoreConformance, AuditEventPagesGoBackInTimeAndStopAtTheirByteBound) {
  for (int i = 0; i < 7; ++i) {
    ASSERT_THAT(store_->RecordAuditEvent(
                    AuditEventAt(kT0 + absl::Seconds(i / 2), absl::StrCat("r", i))),
                IsOk());
  }
  std::vector<std::string> targets;
  AuditPageRequest page;
  int pages = 0;
  while (true) {
    auto list = store_->ListAuditEvents(absl::InfinitePast(), 3, page);
    ASSERT_THAT(list, IsOk());
    ++pages;
    std::vector<std::string> these;
    for (const v1::AuditEvent& event : list->events) these.push_back(event.target());
    targets.insert(targets.begin(), these.begin(), these.end());
    if (!list->truncated) {
      EXPECT_FALSE(list->oldest.has_value());
      break;
    }
    ASSERT_TRUE(list->oldest.has_value());
    page.before = list->oldest;
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(targets, ElementsAre("r0", "r1", "r2", "r3", "r4", "r5", "r6"));

  AuditPageRequest small;
  small.max_bytes = AuditEventAt(kT0, "r0").ByteSizeLong() + 8;  // about one event
  auto one = store_->ListAuditEvents(absl::InfinitePast(), 0, small);
  ASSERT_THAT(one, IsOk());
  EXPECT_TRUE(one->truncated);
  ASSERT_THAT(one->events, SizeIs(1));
  EXPECT_EQ(one->events[0].target(), "r6");
  small.max_bytes = 1;  // less than any event: still one
  auto still_one = store_->ListAuditEvents(absl::InfinitePast(), 0, small);
  ASSERT_THAT(still_one, IsOk());
  EXPECT_THAT(still_one->events, SizeIs(1));
}

// Retention deletes by age and beyond a count, the oldest first, at most
// max_deleted a call.
TEST_P(StoreConformance, AuditRetentionDeletesTheOldestByAgeAndCount) {
  for (int i = 0; i < 10; ++i) {
    ASSERT_THAT(store_->RecordAuditEvent(AuditEventAt(kT0 + absl::Seconds(i), absl::StrCat("r", i))),
                IsOk());
  }
  AuditRetention by_age;
  by_age.older_than = kT0 + absl::Seconds(3);  // r0, r1, r2
  by_age.max_deleted = 2;
  EXPECT_THAT(store_->PruneAuditEvents(by_age), IsOkAndHolds(2u));
  EXPECT_THAT(store_->PruneAuditEvents(by_age), IsOkAndHolds(1u));
  EXPECT_THAT(store_->PruneAuditEvents(by_age), IsOkAndHolds(0u));
  AuditRetention by_count;
  by_count.keep_newest = 4;
  EXPECT_THAT(store_->PruneAuditEvents(by_count), IsOkAndHolds(3u));
  auto left = store_->ListAuditEvents(absl::InfinitePast(), 0);
  ASSERT_THAT(left, IsOk());
  std::vector<std::string> targets;
  for (const v1::AuditEvent& event : left->events) targets.push_back(event.target());
  EXPECT_THAT(targets, ElementsAre("r6", "r7", "r8", "r9"));
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreConformance,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const auto& info) { return BackendName(info.param); });

// --- Opening -----------------------------------------------------------------

TEST(StoreOpen, UnknownSchemeIsRefusedWithoutEchoingTheUrl) {
  EXPECT_THAT(OpenFleetStore("mysql://root:secret@db/fleet"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("\"mysql\""), ::testing::Not(HasSubstr("secret")))));
  EXPECT_THAT(OpenFleetStore("sqlite:"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("file name")));
}

TEST(StoreOpen, UnreachablePostgresIsUnavailableWithThePasswordRedacted) {
  // Port 1 on loopback: nothing listens there.
  EXPECT_THAT(OpenFleetStore("postgres://fleet:secret@127.0.0.1:1/fleet?connect_timeout=5"),
              StatusIs(absl::StatusCode::kUnavailable,
                       ::testing::AllOf(HasSubstr("127.0.0.1:1"), ::testing::Not(HasSubstr("secret")))));
}

TEST(StoreOpen, UnwritableSqliteFileIsUnavailable) {
  EXPECT_THAT(OpenFleetStore("sqlite:/nonexistent-dir/fleet.db"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("/nonexistent-dir/fleet.db")));
}

}  // namespace
}  // namespace weightpath::store::testing
