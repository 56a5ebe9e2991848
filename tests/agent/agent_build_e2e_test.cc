// Directory builds as a device meets them: the real agent binary, the real
// weightpath-server with a catalog of directory builds, and a real HTTP
// mirror, all on loopback. What the engine is handed, what crosses the
// mirror's link (counted in its request log), and what a mirror or a full
// disk can do to a device that already runs a good build.
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/decision/decision_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/model_build.h"
#include "tests/agent/range_http_server.h"
#include "tests/agent/site_cache_process.h"
#include "tests/agent/temp_dir.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"
#include "tests/testing/status_matchers.h"

#ifndef WEIGHTPATH_AGENT_BINARY
#error "the test target defines WEIGHTPATH_AGENT_BINARY"
#endif

namespace weightpath::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using server::testing::ServerProcess;
using server::testing::HttpGet;
using server::testing::SampleValue;
using testing::ArtifactBytes;
using testing::CatalogEntryYaml;
using testing::ModelDirectoryFiles;
using testing::ModelFileSpec;
using testing::RangeHttpServer;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteArtifact;
using testing::WriteModelBuild;
using testing::WriteTextFile;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;

namespace fs = std::filesystem;

constexpr char kModel[] = "Spark-X2.5-1.7B";
constexpr size_t kShardBytes = 2 * 1024 * 1024;
// An x86 server CPU with AMX: the default policy gives it w4a8-amx for speed.
constexpr char kProfileJson[] = R"({
  "arch": "x86_64",
  "cpu_model": "Intel(R) Xeon(R) Platinum 8480C",
  "cpu_flags": ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "amx_int8", "fma", "f16c"],
  "n_logical": 8, "n_physical": 4, "numa_nodes": 1,
  "ram_total_bytes": 34359738368, "ram_available_bytes": 30000000000,
  "accelerator": "none", "supports_bf16": true, "host_os": "linux"
})";
constexpr char kExpectedPath[] = "w4a8-amx";

// `files` laid out by content address under `root`/blobs/sha256/<hex>, as
// a mirror or a site cache's upstream serves them.
void WriteByContent(const std::string& root, const v1::Artifact& build,
                    const std::vector<ModelFileSpec>& files) {
  for (const ModelFileSpec& spec : files) {
    for (const v1::BuildFile& file : build.files()) {
      if (file.path() == spec.path) {
        WriteTextFile(root + "/blobs/sha256/" + file.sha256(), spec.bytes);
      }
    }
  }
}

class AgentBuildEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override { StartMirror(); }

  void StartMirror() {
    fs::create_directories(served());
    absl::StatusOr<std::unique_ptr<RangeHttpServer>> http =
        RangeHttpServer::Start(served(), work_.path());
    ASSERT_THAT(http, IsOk());
    http_ = *std::move(http);
    // Every other path the default policy can hand out: a small single
    // file, so the server accepts the catalog; never fetched here.
    uint32_t seed = 100;
    for (const std::string& name : policy::DefaultPolicy()->ReachablePathNames()) {
      if (name == kExpectedPath) continue;
      others_[name] = WriteArtifact(served() + "/other/" + name + ".bin",
                                    ArtifactBytes(4096, seed++), http_->Url("other/" + name + ".bin"));
    }
    WriteTextFile(profile_path(), kProfileJson);
  }

  std::string served() const { return work_.Sub("served"); }
  std::string device(const std::string& relative) const {
    return work_.Sub(device_name_ + "/" + relative);
  }
  std::string profile_path() const { return work_.Sub("profile.json"); }

  // A build of the model published on the mirror under served()/<name>/.
  v1::Artifact Publish(const std::string& name, const std::vector<ModelFileSpec>& files,
                       const std::string& query = "") {
    v1::Artifact build =
        WriteModelBuild(served() + "/" + name, files, http_->Url(name + "/"), name);
    if (!query.empty()) {
      for (v1::BuildFile& file : *build.mutable_files()) file.set_uri(file.uri() + query);
    }
    return build;
  }

  // (Re)starts the server on a catalog that gives this device `build`.
  void Serve(const v1::Artifact& build) {
    std::string yaml = absl::StrCat("default_model: ", kModel, "\nmodels:\n  ", kModel, ":\n");
    absl::StrAppend(&yaml, "    ", kExpectedPath, ":\n", CatalogEntryYaml(build));
    for (const auto& [name, artifact] : others_) {
      absl::StrAppend(&yaml, "    ", name, ":\n", CatalogEntryYaml(artifact));
    }
    WriteTextFile(work_.Sub("catalog.yaml"), yaml);
    server_.reset();
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start({"--catalog=" + work_.Sub("catalog.yaml"), "--reload_interval=0s"});
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    WriteAgentConfig();
  }

  void WriteAgentConfig() {
    WriteTextFile(device("agent.yaml"),
                  absl::StrCat("server: ", server_->grpc_address(), "\n",
                               "device_id: ",
                               device_name_ == "device" ? std::string("edge-build-0001")
                                                        : "edge-" + device_name_,
                               "\n",
                               "state_dir: ", device("state"), "\n",
                               "cache_dir: ", device("cache"), "\n",
                               "decision_file: ", device("run/decision.json"), "\n",
                               "env_file: ", device("run/engine.env"), "\n",
                               "budget: 30\ncall_timeout: 10\n", extra_config_));
  }

  // One real serve-cache on its own store, its upstream the origin mirror's
  // content-addressed copy of `files` (/cas), named in the devices'
  // artifact_mirrors; the server (re)started on `build`.
  absl::StatusOr<std::unique_ptr<testing::SiteCacheProcess>> ServeThroughSiteCache(
      const v1::Artifact& build, const std::vector<ModelFileSpec>& files) {
    WriteByContent(served() + "/cas", build, files);
    absl::StatusOr<std::unique_ptr<testing::SiteCacheProcess>> site =
        testing::SiteCacheProcess::Start(WEIGHTPATH_AGENT_BINARY, work_.Sub("site-cache"),
                                         {http_->Url("cas")}, work_.Sub("site-cache.err"));
    if (!site.ok()) return site.status();
    extra_config_ = absl::StrCat("artifact_mirrors:\n  - ", (*site)->BaseUrl(), "/\n");
    Serve(build);
    return site;
  }

  // What the server counts devices reported downloading from `source`
  // (weightpath_device_download_bytes_total); -1 when it cannot be read.
  double FleetDownloadBytes(const std::string& source) const {
    absl::StatusOr<std::string> metrics = HttpGet(server_->metrics_address(), "/metrics");
    if (!metrics.ok()) return -1;
    absl::StatusOr<double> value = SampleValue(
        *metrics, absl::StrCat("weightpath_device_download_bytes_total{source=\"", source, "\"}"));
    return value.ok() ? *value : -1;
  }

  std::vector<std::string> BootArgv() const {
    return {WEIGHTPATH_AGENT_BINARY, "boot", "--config", device("agent.yaml")};
  }
  // A boot left running (to be killed, or to meet a fault mid-download);
  // its log goes to `stderr_path` when one is given.
  absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> StartBoot(
      const std::string& stderr_path = "") const {
    ::weightpath::testing::SpawnOptions options;
    options.extra_environment = {{"WEIGHTPATH_HW_PROFILE", profile_path()}};
    options.stderr_path = stderr_path;
    return ::weightpath::testing::Subprocess::Start(BootArgv(), options);
  }
  ProcessResult Boot() {
    return RunProcess(BootArgv(), {{"WEIGHTPATH_HW_PROFILE", profile_path()}}, absl::Seconds(60));
  }

  DecisionRecord Decision() const {
    absl::StatusOr<DecisionRecord> record =
        DecisionFromJson(ReadTextFile(device("run/decision.json")), "decision.json");
    EXPECT_THAT(record, IsOk());
    return record.ok() ? *record : DecisionRecord{};
  }

  std::string BuildDir(const v1::Artifact& build) const {
    return device("cache/builds/" + build.sha256());
  }

  // Body bytes the mirror sent for URLs under /<name>/ (its request log).
  uint64_t BytesServed(const std::string& name) const {
    uint64_t total = 0;
    for (const std::string& line : http_->RequestLog()) {
      if (!absl::StrContains(line, "GET /" + name + "/")) continue;
      const size_t at = line.rfind("bytes=");
      uint64_t bytes = 0;
      if (at != std::string::npos && absl::SimpleAtoi(line.substr(at + 6), &bytes)) total += bytes;
    }
    return total;
  }

  std::string EnvVariable(const std::string& name) const {
    ProcessResult shell = RunProcess({"/bin/sh", "-c", ". \"$1\" && printf '%s' \"$" + name + "\"",
                                      "sh", device("run/engine.env")},
                                     {}, absl::Seconds(10));
    EXPECT_EQ(shell.exit_code, 0) << shell.err;
    return shell.out;
  }

  // The directory the engine was handed holds exactly `files`, byte for byte.
  void ExpectHandedOver(const v1::Artifact& build, const std::vector<ModelFileSpec>& files) {
    const DecisionRecord decision = Decision();
    EXPECT_EQ(decision.artifact_path, BuildDir(build));
    EXPECT_EQ(decision.response.artifact().files_size(), static_cast<int>(files.size()));
    size_t listed = 0;
    for (const auto& entry : fs::recursive_directory_iterator(BuildDir(build))) {
      if (entry.is_regular_file()) ++listed;
    }
    EXPECT_EQ(listed, files.size());
    for (const ModelFileSpec& spec : files) {
      const std::string path = BuildDir(build) + "/" + spec.path;
      EXPECT_EQ(ReadTextFile(path), spec.bytes) << spec.path;
      struct stat info {};
      ASSERT_EQ(::lstat(path.c_str(), &info), 0) << spec.path;
      // A hard link to the blob: a regular file the engine's container
      // sees whatever it mounts, stored once.
      EXPECT_TRUE(S_ISREG(info.st_mode)) << spec.path;
      EXPECT_GE(info.st_nlink, 2u) << spec.path;
    }
  }

  TempDir work_;
  std::unique_ptr<RangeHttpServer> http_;
  std::unique_ptr<ServerProcess> server_;
  std::map<std::string, v1::Artifact> others_;
  std::string extra_config_;
  std::string device_name_ = "device";  // the folder of the device booted
};

// Body bytes the origin mirror sent, every URL counted.
uint64_t BytesIn(const RangeHttpServer& http) {
  uint64_t total = 0;
  for (const std::string& line : http.RequestLog()) {
    const size_t at = line.rfind("bytes=");
    uint64_t bytes = 0;
    if (at != std::string::npos && absl::SimpleAtoi(line.substr(at + 6), &bytes)) total += bytes;
  }
  return total;
}

uint64_t BuildBytes(const std::vector<ModelFileSpec>& files) {
  uint64_t total = 0;
  for (const ModelFileSpec& file : files) total += file.bytes.size();
  return total;
}


TEST_F(AgentBuildEndToEnd, TheEngineIsHandedTheModelDirectoryUnderTheModelsName) {
  const std::vector<ModelFileSpec> files = ModelDirectoryFiles(kShardBytes, 1, 2);
  const v1::Artifact build = Publish("v1", files);
  Serve(build);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  ExpectHandedOver(build, files);
  EXPECT_EQ(EnvVariable("WEIGHTPATH_ARTIFACT"), BuildDir(build));
  EXPECT_THAT(EnvVariable("WEIGHTPATH_ENGINE_ARGS"),
              HasSubstr("--model " + BuildDir(build) + " --served-model-name " + kModel));
  // Every file crossed the link once.
  uint64_t total = 0;
  for (const ModelFileSpec& spec : files) total += spec.bytes.size();
  EXPECT_EQ(BytesServed("v1"), total);

  // A second boot finds everything cached: nothing is fetched.
  const ProcessResult again = Boot();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(BytesServed("v1"), total);
  ExpectHandedOver(build, files);
}

TEST_F(AgentBuildEndToEnd, AnUpgradeWithOneShardChangedFetchesOnlyThatShard) {
  const v1::Artifact first = Publish("v1", ModelDirectoryFiles(kShardBytes, 1, 2));
  Serve(first);
  ASSERT_EQ(Boot().exit_code, 0);

  const std::vector<ModelFileSpec> files = ModelDirectoryFiles(kShardBytes, 1, 3);
  const v1::Artifact second = Publish("v2", files);
  Serve(second);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  ExpectHandedOver(second, files);
  // Only the changed shard (its new bytes) crossed the link: every other
  // file of v2 has bytes the device already held under v1.
  EXPECT_EQ(BytesServed("v2"), files[4].bytes.size());
  for (const std::string& line : http_->RequestLog()) {
    if (absl::StrContains(line, "GET /v2/")) {
      EXPECT_THAT(line, HasSubstr("model-00002-of-00002.safetensors"));
    }
  }
}

// What a mirror can do to a build: one wrong byte, a file it does not have,
// a file of another build under this build's name. Each refused; the device
// keeps booting its last good build, whose directory is untouched.
TEST_F(AgentBuildEndToEnd, AMirrorThatCorruptsDropsOrSwapsAFileIsRefused) {
  const std::vector<ModelFileSpec> good_files = ModelDirectoryFiles(kShardBytes, 1, 2);
  const v1::Artifact good = Publish("good", good_files);
  Serve(good);
  ASSERT_EQ(Boot().exit_code, 0);

  struct Attack {
    const char* name;
    // On the served copy of `files`.
    std::function<void(const std::vector<ModelFileSpec>& files)> tamper;
    const char* reason;
  };
  const Attack attacks[] = {
      {"flipped",
       [&](const std::vector<ModelFileSpec>& files) {
         std::string shard = files[3].bytes;
         shard[shard.size() / 2] ^= 0x01;
         WriteTextFile(served() + "/flipped/" + files[3].path, shard);
       },
       "DATA_LOSS"},
      {"dropped",
       [&](const std::vector<ModelFileSpec>& files) {
         fs::remove(served() + "/dropped/" + files[4].path);
       },
       "NOT_FOUND"},
      {"swapped",
       [&](const std::vector<ModelFileSpec>& files) {
         // The same file of the good build, a valid shard, just not this one.
         WriteTextFile(served() + "/swapped/" + files[4].path, good_files[4].bytes);
       },
       "DATA_LOSS"},
  };
  uint32_t seed = 10;
  for (const Attack& attack : attacks) {
    SCOPED_TRACE(attack.name);
    // Shards no earlier attempt left in the cache (the good files of a
    // refused build are kept as blobs, and would fill the gap).
    const std::vector<ModelFileSpec> next_files = ModelDirectoryFiles(kShardBytes, seed, seed + 1);
    seed += 2;
    const v1::Artifact next = Publish(attack.name, next_files);
    attack.tamper(next_files);
    Serve(next);
    const ProcessResult boot = Boot();
    EXPECT_EQ(boot.exit_code, 3) << boot.err;  // the last good decision
    EXPECT_THAT(boot.err, HasSubstr(attack.reason));
    ExpectHandedOver(good, good_files);
    EXPECT_FALSE(fs::exists(BuildDir(next)));
  }
}

TEST_F(AgentBuildEndToEnd, OldBuildsAreEvictedUnderTheLimitAndABuildThatCannotFitIsRefusedFirst) {
  // Room for about two builds: the third evicts what only the first held.
  extra_config_ = absl::StrCat("cache_max_bytes: ", 9 * kShardBytes / 2, "\n");
  const v1::Artifact v1 = Publish("v1", ModelDirectoryFiles(kShardBytes, 1, 2));
  Serve(v1);
  ASSERT_EQ(Boot().exit_code, 0);
  const v1::Artifact v2 = Publish("v2", ModelDirectoryFiles(kShardBytes, 1, 3));
  Serve(v2);
  ASSERT_EQ(Boot().exit_code, 0);
  const std::vector<ModelFileSpec> v3_files = ModelDirectoryFiles(kShardBytes, 4, 5);
  const v1::Artifact v3 = Publish("v3", v3_files);
  Serve(v3);
  const ProcessResult third = Boot();
  ASSERT_EQ(third.exit_code, 0) << third.err;
  ExpectHandedOver(v3, v3_files);
  // v1's own shard went; nothing of the running build did.
  EXPECT_FALSE(fs::exists(device("cache/" + v1.files(4).sha256())));
  uint64_t held = 0;
  for (const auto& entry : fs::directory_iterator(device("cache"))) {
    if (entry.is_regular_file()) held += entry.file_size();
  }
  EXPECT_LE(held, 9 * kShardBytes / 2);

  // A build larger than the whole cache: refused before a byte is fetched,
  // the server told, and the device keeps v3.
  const v1::Artifact huge = Publish("huge", ModelDirectoryFiles(3 * kShardBytes, 6, 7));
  Serve(huge);
  const ProcessResult refused = Boot();
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(refused.err, HasSubstr("cache_max_bytes"));
  EXPECT_THAT(refused.err, HasSubstr("reported OUTCOME_CACHE_FULL"));
  EXPECT_EQ(BytesServed("huge"), 0u);
  ExpectHandedOver(v3, v3_files);
}

// The agent killed (-9) while the shards of a build download in parallel;
// the next boot resumes each from its partial file and fetches only what is
// missing.
TEST_F(AgentBuildEndToEnd, AKilledDownloadResumesWithOnlyTheMissingBytes) {
  const std::vector<ModelFileSpec> files = ModelDirectoryFiles(kShardBytes, 1, 2);
  // 64 KiB every 100 ms per file: a few seconds per shard.
  const v1::Artifact slow = Publish("v1", files, "?trickle=65536");
  Serve(slow);
  absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> agent = StartBoot();
  ASSERT_THAT(agent, IsOk());
  const auto partial_bytes = [&](const ModelFileSpec& spec) -> uint64_t {
    const std::string digest = Sha256OfFile(served() + "/v1/" + spec.path).value();
    std::error_code error;
    const uint64_t size = fs::file_size(device("cache/" + digest + ".partial"), error);
    return error ? 0 : size;
  };
  // Both shards under way at once, then the kill.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while ((partial_bytes(files[3]) < 256 * 1024 || partial_bytes(files[4]) < 256 * 1024) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  (*agent)->Signal(SIGKILL);
  (*agent)->Wait(absl::Seconds(10));
  const uint64_t held = partial_bytes(files[3]) + partial_bytes(files[4]);
  ASSERT_GE(held, 512u * 1024);
  ASSERT_LT(held, 2 * kShardBytes);
  EXPECT_FALSE(fs::exists(BuildDir(slow)));

  const uint64_t before = BytesServed("v1");
  const v1::Artifact fast = Publish("v1", files);  // the same build, served at full speed
  Serve(fast);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  ExpectHandedOver(fast, files);
  // The small files may have finished before the kill; the shards resumed.
  uint64_t missing = 2 * files[3].bytes.size() - held;
  for (size_t i = 0; i < 3; ++i) missing += files[i].bytes.size();
  missing += files[5].bytes.size();
  EXPECT_LE(BytesServed("v1") - before, missing);
  EXPECT_GE(BytesServed("v1") - before, 2 * files[3].bytes.size() - held);
}

// The cache on a small tmpfs that fills (a ballast written by something
// else) while a new build downloads: a clear ENOSPC, no half-built
// directory, and the last good build still boots. Skipped where the test
// may not mount.
TEST_F(AgentBuildEndToEnd, ADiskThatFillsMidDownloadLeavesTheLastGoodBuildBooting) {
  fs::create_directories(device("cache"));
  if (::mount("tmpfs", device("cache").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=12m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs on " << device("cache") << ": " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{device("cache")};
  extra_config_ = "cache_min_free_bytes: 65536\n";
  const std::vector<ModelFileSpec> good_files = ModelDirectoryFiles(kShardBytes / 2, 1, 2);
  const v1::Artifact good = Publish("good", good_files);
  Serve(good);
  ASSERT_EQ(Boot().exit_code, 0);

  const v1::Artifact next = Publish("next", ModelDirectoryFiles(kShardBytes, 3, 4), "?trickle=65536");
  Serve(next);
  absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> agent =
      StartBoot(work_.Sub("agent.err"));
  ASSERT_THAT(agent, IsOk());
  // Once bytes of the new build arrive, something else takes the volume.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  bool started = false;
  while (!started && absl::Now() < give_up) {
    // The agent renames and removes files meanwhile: an entry gone between
    // the listing and its size is no error here.
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(device("cache"), error)) {
      std::error_code size_error;
      const uintmax_t size = entry.file_size(size_error);
      started = started || (absl::EndsWith(entry.path().string(), ".partial") && !size_error &&
                            size > 0);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(started);
  {
    const int fd = ::open(device("cache/ballast").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    const std::string chunk(65536, 'x');
    while (::write(fd, chunk.data(), chunk.size()) > 0) {
    }
    ::close(fd);
  }
  const ::weightpath::testing::ExitStatus ended = (*agent)->Wait(absl::Seconds(60));
  EXPECT_EQ(ended.exit_code, 3);
  const std::string log = ReadTextFile(work_.Sub("agent.err"));
  EXPECT_THAT(log, HasSubstr("ENOSPC"));
  fs::remove(device("cache/ballast"));
  ExpectHandedOver(good, good_files);
  EXPECT_FALSE(fs::exists(BuildDir(next)));
  for (const auto& entry : fs::directory_iterator(device("cache/builds"))) {
    EXPECT_THAT(entry.path().filename().string(), Not(HasSubstr(".staging")));
  }
  EXPECT_THAT(ReadTextFile(device("run/engine.env")), HasSubstr(BuildDir(good)));
}

// A site: the origin (the catalog's mirror, also serving blobs by content
// address under /cas as the site cache's upstream), one real serve-cache,
// and devices whose artifact_mirrors name it. The first device's boot pulls
// each blob across the uplink once; the second's fetches nothing from the
// origin.
TEST_F(AgentBuildEndToEnd, ASecondDeviceAtASiteFetchesNothingFromTheOrigin) {
  const std::vector<ModelFileSpec> files = ModelDirectoryFiles(kShardBytes, 41, 42);
  const v1::Artifact build = Publish("site", files);
  absl::StatusOr<std::unique_ptr<testing::SiteCacheProcess>> site =
      ServeThroughSiteCache(build, files);
  ASSERT_THAT(site, IsOk());

  device_name_ = "device-a";
  WriteAgentConfig();
  const ProcessResult first = Boot();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ExpectHandedOver(build, files);
  const uint64_t after_first = BytesIn(*http_);
  // Each blob once, and a one-byte length probe for each.
  EXPECT_LE(after_first, BuildBytes(files) * 105 / 100);
  EXPECT_EQ(BytesServed("site"), 0u);  // nothing from the catalog's own URIs
  EXPECT_THAT(first.err, HasSubstr("from mirrors, 0 from origin"));

  device_name_ = "device-b";
  WriteAgentConfig();
  const ProcessResult second = Boot();
  ASSERT_EQ(second.exit_code, 0) << second.err;
  ExpectHandedOver(build, files);
  EXPECT_EQ(BytesIn(*http_), after_first);
  EXPECT_THAT(second.err, HasSubstr("0 from origin"));

  ProcessResult metrics = RunProcess({"curl", "-s", (*site)->BaseUrl() + "/metrics"}, {},
                                     absl::Seconds(10));
  EXPECT_THAT(metrics.out, HasSubstr("weightpath_site_cache_refused_digests_total 0"));
  EXPECT_THAT(metrics.out, Not(HasSubstr("weightpath_site_cache_hits_total 0\n")));

  // The cache killed: the next device falls back to the origin and boots.
  (*site)->Stop();
  device_name_ = "device-c";
  WriteAgentConfig();
  const ProcessResult third = Boot();
  ASSERT_EQ(third.exit_code, 0) << third.err;
  ExpectHandedOver(build, files);
  EXPECT_EQ(BytesServed("site"), BuildBytes(files));
  EXPECT_THAT(third.err, HasSubstr("skipped"));

  // Each boot reported what it downloaded by source: the fleet view of
  // what the site cache saved (two builds' worth through it, one from the
  // origin).
  EXPECT_EQ(FleetDownloadBytes("mirror"), 2.0 * static_cast<double>(BuildBytes(files)));
  EXPECT_EQ(FleetDownloadBytes("origin"), static_cast<double>(BuildBytes(files)));
}

// A rollout reaching a site: ten devices boot the same build at once
// through one cold site cache. Its upstream sends each blob about once (the
// cache coalesces the ten misses), every device installs the signed build,
// and the fleet's counters say where the bytes came from.
TEST_F(AgentBuildEndToEnd, TenDevicesBootingAtOnceThroughASiteCacheCostTheOriginOneBuild) {
  constexpr int kDevices = 10;
  const std::vector<ModelFileSpec> files = ModelDirectoryFiles(kShardBytes, 71, 72);
  const v1::Artifact build = Publish("tenfold", files);
  absl::StatusOr<std::unique_ptr<testing::SiteCacheProcess>> site =
      ServeThroughSiteCache(build, files);
  ASSERT_THAT(site, IsOk());

  std::vector<std::unique_ptr<::weightpath::testing::Subprocess>> boots;
  for (int i = 0; i < kDevices; ++i) {
    device_name_ = absl::StrCat("site-device-", i);
    WriteAgentConfig();
    absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> boot =
        StartBoot(work_.Sub(device_name_ + ".err"));
    ASSERT_THAT(boot, IsOk());
    boots.push_back(*std::move(boot));
  }
  for (int i = 0; i < kDevices; ++i) {
    device_name_ = absl::StrCat("site-device-", i);
    const ::weightpath::testing::ExitStatus ended = boots[i]->Wait(absl::Seconds(90));
    EXPECT_EQ(ended.exit_code, 0) << ReadTextFile(work_.Sub(device_name_ + ".err"));
    ExpectHandedOver(build, files);
  }
  EXPECT_LE(BytesIn(*http_), BuildBytes(files) * 105 / 100) << "the site's uplink carried more "
                                                                "than one build";
  EXPECT_EQ(BytesServed("tenfold"), 0u);  // nothing from the catalog's own URIs

  EXPECT_EQ(FleetDownloadBytes("mirror"), kDevices * static_cast<double>(BuildBytes(files)));
  EXPECT_EQ(FleetDownloadBytes("origin"), 0);
}

// The site cache stopped while a device's boot waits on it (its upstream
// slow, so the cache is mid-fetch): the device moves on to the origin and
// installs the build, and the cache, started again on the same store,
// serves the next device whole and verified.
TEST_F(AgentBuildEndToEnd, ASiteCacheStoppedMidDownloadLeavesTheDeviceOnTheOrigin) {
  const std::vector<ModelFileSpec> files = ModelDirectoryFiles(kShardBytes, 61, 62);
  const v1::Artifact build = Publish("killed", files);
  WriteByContent(work_.Sub("cas-slow"), build, files);
  fs::create_directories(work_.Sub("logs-cas-slow"));
  absl::StatusOr<std::unique_ptr<RangeHttpServer>> slow_upstream =
      RangeHttpServer::Start(work_.Sub("cas-slow"), work_.Sub("logs-cas-slow"), "trickle=65536");
  ASSERT_THAT(slow_upstream, IsOk());
  absl::StatusOr<std::unique_ptr<testing::SiteCacheProcess>> site =
      testing::SiteCacheProcess::Start(WEIGHTPATH_AGENT_BINARY, work_.Sub("site-cache"),
                                       {(*slow_upstream)->Url("")}, work_.Sub("site-cache.err"));
  ASSERT_THAT(site, IsOk());
  extra_config_ = absl::StrCat("artifact_mirrors:\n  - ", (*site)->BaseUrl(), "/\n");
  Serve(build);

  device_name_ = "device-a";
  WriteAgentConfig();
  absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> agent =
      StartBoot(work_.Sub("device-a.err"));
  ASSERT_THAT(agent, IsOk());
  // Once the cache is pulling from its upstream, it goes.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (BytesIn(**slow_upstream) == 0 && (*slow_upstream)->RequestLog().empty() &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::SleepFor(absl::Milliseconds(300));
  (*site)->Stop();
  const ::weightpath::testing::ExitStatus ended = (*agent)->Wait(absl::Seconds(60));
  EXPECT_EQ(ended.exit_code, 0) << ReadTextFile(work_.Sub("device-a.err"));
  ExpectHandedOver(build, files);
  EXPECT_GT(BytesServed("killed"), 0u) << "the origin served what the cache could not";
  for (const auto& entry : fs::directory_iterator(device("cache"))) {
    EXPECT_FALSE(absl::EndsWith(entry.path().string(), ".partial")) << entry.path();
  }

  // Started again on its store, with a fast upstream: the next device gets
  // every blob from it, nothing from the catalog's URIs.
  WriteByContent(served() + "/cas", build, files);
  absl::StatusOr<std::unique_ptr<testing::SiteCacheProcess>> again =
      testing::SiteCacheProcess::Start(WEIGHTPATH_AGENT_BINARY, work_.Sub("site-cache"),
                                       {http_->Url("cas")}, work_.Sub("site-cache-2.err"));
  ASSERT_THAT(again, IsOk());
  extra_config_ = absl::StrCat("artifact_mirrors:\n  - ", (*again)->BaseUrl(), "/\n");
  const uint64_t before = BytesServed("killed");
  device_name_ = "device-b";
  WriteAgentConfig();
  const ProcessResult second = Boot();
  ASSERT_EQ(second.exit_code, 0) << second.err;
  ExpectHandedOver(build, files);
  EXPECT_EQ(BytesServed("killed"), before);
  EXPECT_THAT(second.err, HasSubstr("0 from origin"));
}

// Mirrors that are down, do not have the blob, send other bytes under its
// name, or trickle: each skipped (its failure logged once, with its URL),
// and the device installs exactly the signed build from the origin within
// a bound set by mirror_stall_timeout, not by the boot's budget.
TEST_F(AgentBuildEndToEnd, HostileMirrorsAreSkippedAndTheBuildInstallsFromTheOrigin) {
  const std::vector<ModelFileSpec> files = ModelDirectoryFiles(kShardBytes, 51, 52);
  const v1::Artifact build = Publish("hostile", files);
  // Wrong bytes: every blob the same size, one byte flipped.
  std::vector<ModelFileSpec> flipped = files;
  for (ModelFileSpec& spec : flipped) spec.bytes[spec.bytes.size() / 2] ^= 0x01;
  WriteByContent(work_.Sub("mirror-wrong"), build, flipped);
  WriteByContent(work_.Sub("mirror-slow"), build, files);
  fs::create_directories(work_.Sub("mirror-empty"));
  fs::create_directories(work_.Sub("logs-wrong"));
  fs::create_directories(work_.Sub("logs-slow"));
  fs::create_directories(work_.Sub("logs-empty"));
  absl::StatusOr<std::unique_ptr<RangeHttpServer>> wrong =
      RangeHttpServer::Start(work_.Sub("mirror-wrong"), work_.Sub("logs-wrong"));
  absl::StatusOr<std::unique_ptr<RangeHttpServer>> slow =
      RangeHttpServer::Start(work_.Sub("mirror-slow"), work_.Sub("logs-slow"), "trickle=10");
  absl::StatusOr<std::unique_ptr<RangeHttpServer>> empty =
      RangeHttpServer::Start(work_.Sub("mirror-empty"), work_.Sub("logs-empty"));
  ASSERT_THAT(wrong, IsOk());
  ASSERT_THAT(slow, IsOk());
  ASSERT_THAT(empty, IsOk());
  // A port nobody listens on: one the kernel gave a server that has gone.
  absl::StatusOr<std::unique_ptr<RangeHttpServer>> gone =
      RangeHttpServer::Start(work_.Sub("mirror-empty"), work_.Sub("logs-empty"));
  ASSERT_THAT(gone, IsOk());
  const std::string down = (*gone)->Url("");
  (*gone)->Stop();

  extra_config_ = absl::StrCat("mirror_stall_timeout: 1s\nartifact_mirrors:\n  - ", down,
                               "\n  - ", (*empty)->Url("x"), "\n  - ", (*wrong)->Url(""),
                               "\n  - ", (*slow)->Url(""), "\n");
  Serve(build);
  const absl::Time start = absl::Now();
  const ProcessResult boot = Boot();
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  ExpectHandedOver(build, files);
  // The trickling mirror costs about a second per transfer at once, not the
  // 30 s budget.
  EXPECT_LT(took, absl::Seconds(15));
  EXPECT_EQ(BytesServed("hostile"), BuildBytes(files));
  for (const std::string& mirror : {down, (*empty)->Url("x"), (*wrong)->Url(""),
                                    (*slow)->Url("")}) {
    std::string base = mirror;
    while (!base.empty() && base.back() == '/') base.pop_back();
    const std::string logged = absl::StrCat("mirror ", base, " skipped");
    EXPECT_THAT(boot.err, HasSubstr(logged));
    EXPECT_EQ(boot.err.find(logged), boot.err.rfind(logged)) << "logged more than once: " << base;
  }
  EXPECT_THAT(boot.err, HasSubstr("DATA_LOSS"));
  EXPECT_THAT(boot.err, HasSubstr("0 from mirrors"));
  // No byte of the wrong mirror stayed: no partial download is left.
  for (const auto& entry : fs::directory_iterator(device("cache"))) {
    EXPECT_FALSE(absl::EndsWith(entry.path().string(), ".partial")) << entry.path();
  }
}

}  // namespace
}  // namespace weightpath::agent
