// The build cache (agent/fetch/build_cache.h) against the real HTTP mirror
// (range_http_server.py) and real files: directory builds of a model's
// files, dedup across builds, parallel downloads under one rate, eviction,
// refusal before a download, ENOSPC on a small tmpfs, planted symlinks, and
// a process killed with SIGKILL mid-download.
#include "agent/fetch/build_cache.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/fetch/artifact_fetcher.h"
#include "agent/fetch/cache_directory.h"
#include "agent/fetch/sha256_file.h"
#include "common/clock.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/model_build.h"
#include "tests/agent/range_http_server.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"
#include "trust/build_manifest.h"

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::ArtifactBytes;
using testing::RangeHttpServer;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteTextFile;
using weightpath::testing::IsOk;
using weightpath::testing::StatusIs;

namespace fs = std::filesystem;

constexpr absl::Duration kTimeLimit = absl::Seconds(30);

using Files = std::map<std::string, std::string>;  // path -> bytes

std::string Safetensors(size_t data_bytes, uint32_t seed) {
  return testing::SafetensorsBytes("model.layers.0.weight", data_bytes, seed);
}

// The six files of tests/agent/model_build.h; `second_shard_seed` varies
// the second shard only.
Files ModelFiles(uint32_t second_shard_seed = 2, size_t shard_bytes = 3 << 20) {
  Files files;
  for (const testing::ModelFileSpec& spec :
       testing::ModelDirectoryFiles(shard_bytes, 1, second_shard_seed)) {
    files[spec.path] = spec.bytes;
  }
  return files;
}

class AgentBuildCache : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(served_.path());
    absl::StatusOr<std::unique_ptr<RangeHttpServer>> server =
        RangeHttpServer::Start(served_.path(), work_.path());
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    options_.cache_dir = cache_.Sub("cache");
    options_.min_free_bytes = 0;
  }

  // Writes `files` under served/<name>/ and returns the directory build the
  // mirror serves them as; `query` is appended to every file's uri.
  v1::Artifact Build(const std::string& name, const Files& files, const std::string& query = "") {
    v1::Artifact artifact;
    for (const auto& [path, bytes] : files) {
      const std::string local = served_.Sub(name + "/" + path);
      WriteTextFile(local, bytes);
      v1::BuildFile* file = artifact.add_files();
      file->set_path(path);
      file->set_sha256(Sha256OfFile(local).value());
      file->set_size_bytes(bytes.size());
      file->set_uri(server_->Url(name + "/" + path) + query);
    }
    const trust::BuildManifestDigest digest =
        trust::DigestBuildManifest(trust::ToBuildManifestFiles(artifact.files()));
    artifact.set_sha256(digest.sha256);
    artifact.set_size_bytes(digest.size_bytes);
    return artifact;
  }

  // Body bytes the mirror sent for paths under /<prefix>.
  uint64_t BytesServed(const std::string& prefix) const {
    uint64_t total = 0;
    for (const std::string& line : server_->RequestLog()) {
      if (!absl::StartsWith(line, "GET /" + prefix)) continue;
      uint64_t bytes = 0;
      if (absl::SimpleAtoi(line.substr(line.rfind("bytes=") + 6), &bytes)) total += bytes;
    }
    return total;
  }

  std::unique_ptr<BuildCache> Cache() { return MakeBuildCache(options_, SystemClockInstance()); }
  std::string BlobPath(const std::string& sha256) const {
    return options_.cache_dir + "/" + sha256;
  }
  std::string BuildPath(const v1::Artifact& artifact) const {
    return options_.cache_dir + "/builds/" + artifact.sha256();
  }

  void ExpectFilesAre(const std::string& directory, const Files& files) {
    for (const auto& [path, bytes] : files) {
      EXPECT_EQ(ReadTextFile(directory + "/" + path), bytes) << path;
    }
    size_t count = 0;
    for (const auto& entry : fs::recursive_directory_iterator(directory)) {
      if (entry.is_regular_file()) ++count;
    }
    EXPECT_EQ(count, files.size());
  }

  TempDir served_;
  TempDir work_;
  TempDir cache_;
  std::unique_ptr<RangeHttpServer> server_;
  BuildCacheOptions options_;
};

TEST_F(AgentBuildCache, DirectoryBuildIsStagedByteIdenticalAsHardLinksToItsBlobs) {
  const Files files = ModelFiles();
  const v1::Artifact build = Build("v1", files);
  auto cache = Cache();
  absl::StatusOr<CachedBuild> staged = cache->Stage(build, {}, kTimeLimit);
  ASSERT_THAT(staged, IsOk());
  EXPECT_TRUE(staged->directory);
  EXPECT_EQ(staged->path, BuildPath(build));
  EXPECT_EQ(staged->files, 6);
  EXPECT_EQ(staged->files_downloaded, 6);
  ExpectFilesAre(staged->path, files);
  for (const v1::BuildFile& file : build.files()) {
    struct stat linked, blob;
    ASSERT_EQ(::stat((staged->path + "/" + file.path()).c_str(), &linked), 0);
    ASSERT_EQ(::stat(BlobPath(file.sha256()).c_str(), &blob), 0);
    EXPECT_EQ(linked.st_ino, blob.st_ino) << file.path();
  }
  EXPECT_FALSE(fs::exists(BlobPath(build.files(0).sha256()) + ".partial"));

  // Cached: no network, the same directory, also after it was deleted.
  const size_t requests = server_->RequestLog().size();
  fs::remove_all(staged->path);
  absl::StatusOr<CachedBuild> cached = cache->CheckCached(build);
  ASSERT_THAT(cached, IsOk());
  EXPECT_EQ(cached->path, staged->path);
  ExpectFilesAre(cached->path, files);
  EXPECT_EQ(server_->RequestLog().size(), requests);
  absl::StatusOr<CachedBuild> again = cache->Stage(build, {}, kTimeLimit);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->files_downloaded, 0);
  EXPECT_EQ(server_->RequestLog().size(), requests);
}

TEST_F(AgentBuildCache, UpgradeWithOneShardChangedDownloadsOnlyThatShard) {
  const v1::Artifact v1 = Build("v1", ModelFiles(2));
  const Files v2_files = ModelFiles(3);
  const v1::Artifact v2 = Build("v2", v2_files);
  auto cache = Cache();
  ASSERT_THAT(cache->Stage(v1, {}, kTimeLimit), IsOk());
  absl::StatusOr<CachedBuild> upgraded = cache->Stage(v2, {&v1}, kTimeLimit);
  ASSERT_THAT(upgraded, IsOk());
  const uint64_t shard = v2_files.at("model-00002-of-00002.safetensors").size();
  EXPECT_EQ(BytesServed("v2/"), shard);
  EXPECT_EQ(upgraded->files_downloaded, 1);
  EXPECT_EQ(upgraded->bytes_transferred, shard);
  ExpectFilesAre(upgraded->path, v2_files);
  // Five blobs shared, one each of their own: seven blobs, two builds.
  absl::StatusOr<CacheContents> contents = ScanCache(options_.cache_dir);
  ASSERT_THAT(contents, IsOk());
  EXPECT_EQ(contents->blobs.size(), 7u);
  EXPECT_EQ(contents->builds.size(), 2u);
}

// Linking a blob into another build's directory (or removing one) moves
// its ctime; the verified stamp follows the agent's own link changes, so a
// cached boot does not hash every shared shard again after an upgrade.
TEST_F(AgentBuildCache, StampsFollowTheLinksSoSharedBlobsAreNotHashedAgain) {
  const v1::Artifact v1 = Build("v1", ModelFiles(2));
  const v1::Artifact v2 = Build("v2", ModelFiles(3));
  auto cache = Cache();
  ASSERT_THAT(cache->Stage(v1, {}, kTimeLimit), IsOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // past the ctime window
  absl::StatusOr<CachedBuild> first = cache->CheckCached(v1);
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->files_hashed, 6) << "fresh downloads are hashed and stamped once";
  absl::StatusOr<CachedBuild> stamped = cache->CheckCached(v1);
  ASSERT_THAT(stamped, IsOk());
  EXPECT_EQ(stamped->files_hashed, 0);
  ASSERT_THAT(cache->Stage(v2, {&v1}, kTimeLimit), IsOk());
  absl::StatusOr<CachedBuild> after_upgrade = cache->CheckCached(v1);
  ASSERT_THAT(after_upgrade, IsOk());
  EXPECT_EQ(after_upgrade->files_hashed, 0) << "the five shared blobs kept their stamps";
  ASSERT_THAT(cache->Collect({&v1}), IsOk());  // v2's directory goes
  absl::StatusOr<CachedBuild> after_collect = cache->CheckCached(v1);
  ASSERT_THAT(after_collect, IsOk());
  EXPECT_EQ(after_collect->files_hashed, 0);
}

// An empty file is made, never downloaded; two paths with the same bytes
// share one blob.
TEST_F(AgentBuildCache, EmptyAndDuplicateFilesShareBlobs) {
  const Files files = {{"added_tokens.json", ""},
                       {"a/generation_config.json", "{\"top_p\":0.9}"},
                       {"b/generation_config.json", "{\"top_p\":0.9}"}};
  const v1::Artifact build = Build("dup", files);
  auto cache = Cache();
  absl::StatusOr<CachedBuild> staged = cache->Stage(build, {}, kTimeLimit);
  ASSERT_THAT(staged, IsOk());
  ExpectFilesAre(staged->path, files);
  EXPECT_EQ(staged->files_downloaded, 1);
  EXPECT_EQ(server_->RequestLog().size(), 1u);
  absl::StatusOr<CacheContents> contents = ScanCache(options_.cache_dir);
  ASSERT_THAT(contents, IsOk());
  EXPECT_EQ(contents->blobs.size(), 2u);
  EXPECT_THAT(cache->CheckCached(build), IsOk());
}

// Each file's mirror answers after 300 ms: four files in parallel take
// about 0.3 s, not the 1.2 s of one after the other.
TEST_F(AgentBuildCache, FilesDownloadInParallel) {
  Files files;
  for (int i = 0; i < 4; ++i) files[absl::StrCat("shard-", i)] = ArtifactBytes(100000, 40 + i);
  const v1::Artifact build = Build("slow", files, "?delay_ms=300");
  options_.parallel_downloads = 4;
  const absl::Time start = absl::Now();
  ASSERT_THAT(Cache()->Stage(build, {}, kTimeLimit), IsOk());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Milliseconds(1100)) << "the downloads did not overlap (serial: 1.2 s)";
}

// max_download_rate caps the sum: two files of 512 KiB at 1 MiB/s take
// about a second together (each alone at the rate would take half).
TEST_F(AgentBuildCache, RateLimitCapsTheSumOfParallelTransfers) {
  const Files files = {{"a.bin", ArtifactBytes(512 << 10, 50)},
                       {"b.bin", ArtifactBytes(512 << 10, 51)}};
  const v1::Artifact build = Build("rate", files);
  options_.parallel_downloads = 2;
  options_.max_download_rate = 1 << 20;
  const absl::Time start = absl::Now();
  ASSERT_THAT(Cache()->Stage(build, {}, kTimeLimit), IsOk());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(850));
  EXPECT_LT(took, absl::Milliseconds(2500));
}

TEST_F(AgentBuildCache, EvictionUnderMaxBytesKeepsTheKeptBuilds) {
  // Three builds of ~1 MiB each, no file shared; room for two.
  std::vector<v1::Artifact> builds;
  for (int b = 0; b < 3; ++b) {
    builds.push_back(Build(absl::StrCat("b", b),
                           {{"config.json", absl::StrCat("{\"build\":", b, "}")},
                            {"model.safetensors", Safetensors(1 << 20, 60 + b)}}));
  }
  options_.max_bytes = (2 << 20) + (1 << 19);
  auto cache = Cache();
  ASSERT_THAT(cache->Stage(builds[0], {}, kTimeLimit), IsOk());
  cache->MarkUsed(builds[0]);
  ASSERT_THAT(cache->Stage(builds[1], {&builds[0]}, kTimeLimit), IsOk());
  cache->MarkUsed(builds[1]);
  // The running build (1) and the last good one (0) are kept: 2 cannot fit.
  EXPECT_THAT(cache->Stage(builds[2], {&builds[1], &builds[0]}, kTimeLimit),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("does not fit"), HasSubstr("cache_max_bytes 2621440"),
                             HasSubstr("nothing was downloaded"))));
  EXPECT_EQ(BytesServed("b2/"), 0u);
  // With only build 1 kept, build 0 goes (its directory, then its blobs).
  absl::StatusOr<CachedBuild> staged = cache->Stage(builds[2], {&builds[1]}, kTimeLimit);
  ASSERT_THAT(staged, IsOk());
  EXPECT_GT(staged->bytes_evicted, 1u << 20);
  EXPECT_FALSE(fs::exists(BuildPath(builds[0])));
  for (const v1::BuildFile& file : builds[0].files()) {
    EXPECT_FALSE(fs::exists(BlobPath(file.sha256()))) << file.path();
  }
  EXPECT_THAT(cache->CheckCached(builds[1]), IsOk());
  EXPECT_THAT(cache->CheckCached(builds[2]), IsOk());
  absl::StatusOr<CacheContents> contents = ScanCache(options_.cache_dir);
  ASSERT_THAT(contents, IsOk());
  EXPECT_LE(contents->blob_bytes + contents->partial_bytes, options_.max_bytes);
}

TEST_F(AgentBuildCache, BuildLargerThanTheCacheIsRefusedBeforeAnyDownload) {
  const v1::Artifact build = Build("big", ModelFiles());
  options_.max_bytes = 1 << 20;
  EXPECT_THAT(Cache()->Stage(build, {}, kTimeLimit),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("it needs 6"), HasSubstr("cache_max_bytes 1048576"),
                             HasSubstr("cache_min_free_bytes"), HasSubstr("eviction freed 0"))));
  EXPECT_THAT(server_->RequestLog(), IsEmpty());
  EXPECT_FALSE(fs::exists(BuildPath(build)));
}

TEST_F(AgentBuildCache, FreeSpaceFloorRefusesBeforeAnyDownload) {
  const v1::Artifact build = Build("floor", ModelFiles());
  options_.min_free_bytes = uint64_t{1} << 60;  // more than any disk
  EXPECT_THAT(Cache()->Stage(build, {}, kTimeLimit),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("bytes free"), HasSubstr("cache_min_free_bytes"))));
  EXPECT_THAT(server_->RequestLog(), IsEmpty());
}

// One file's bytes are wrong: that file is refused by name, the others'
// verified blobs stay (an upgrade later fetches only what is missing), and
// no build directory is published.
TEST_F(AgentBuildCache, OneWrongFileIsRefusedAndTheOthersAreKept) {
  Files files = ModelFiles();
  const v1::Artifact build = Build("wrong", files);
  std::string bad = files.at("tokenizer.json");
  bad[10] ^= 0x01;
  WriteTextFile(served_.Sub("wrong/tokenizer.json"), bad);
  auto cache = Cache();
  EXPECT_THAT(cache->Stage(build, {}, kTimeLimit),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("artifact.files[tokenizer.json]"), HasSubstr("corrupted"))));
  EXPECT_FALSE(fs::exists(BuildPath(build)));
  for (const v1::BuildFile& file : build.files()) {
    EXPECT_EQ(fs::exists(BlobPath(file.sha256())), file.path() != "tokenizer.json") << file.path();
  }
  WriteTextFile(served_.Sub("wrong/tokenizer.json"), files.at("tokenizer.json"));
  const uint64_t before = BytesServed("wrong/");
  absl::StatusOr<CachedBuild> fixed = cache->Stage(build, {}, kTimeLimit);
  ASSERT_THAT(fixed, IsOk());
  EXPECT_EQ(BytesServed("wrong/") - before, files.at("tokenizer.json").size());
  ExpectFilesAre(fixed->path, files);
}

TEST_F(AgentBuildCache, FilesThatAreNotTheSignedManifestAreRefused) {
  v1::Artifact build = Build("swap", ModelFiles());
  v1::Artifact swapped = build;
  swapped.mutable_files(0)->set_sha256(build.files(1).sha256());
  EXPECT_THAT(Cache()->Stage(swapped, {}, kTimeLimit),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("artifact.files: their manifest has sha256"),
                             HasSubstr(build.sha256()))));
  EXPECT_THAT(server_->RequestLog(), IsEmpty());
}

// A path the manifest rules refuse never reaches the filesystem: nothing
// is created, not even cache_dir.
TEST_F(AgentBuildCache, HostilePathCreatesNothing) {
  for (const std::string path : {"../escape.json", "/etc/cron.d/x", "a/../../b", "a\\b"}) {
    v1::Artifact build = Build("hostile", {{"config.json", "{}"}});
    build.mutable_files(0)->set_path(path);
    const trust::BuildManifestDigest digest =
        trust::DigestBuildManifest(trust::ToBuildManifestFiles(build.files()));
    build.set_sha256(digest.sha256);
    build.set_size_bytes(digest.size_bytes);
    EXPECT_THAT(Cache()->Stage(build, {}, kTimeLimit),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("artifact.files")))
        << path;
  }
  EXPECT_FALSE(fs::exists(options_.cache_dir));
  EXPECT_FALSE(fs::exists(cache_.Sub("escape.json")));
  EXPECT_THAT(server_->RequestLog(), IsEmpty());
}

// Symlinks planted in cache_dir/builds are never followed: at the build's
// own name, as a file inside an old copy of it, and as a staging directory.
TEST_F(AgentBuildCache, PlantedSymlinksAreNotFollowed) {
  const Files files = {{"config.json", "{}"}, {"sub/model.safetensors", Safetensors(4096, 70)}};
  const v1::Artifact build = Build("links", files);
  TempDir outside;
  WriteTextFile(outside.Sub("precious"), "keep me");
  fs::create_directories(options_.cache_dir + "/builds");
  fs::create_directory_symlink(outside.path(), BuildPath(build));
  const std::string staging =
      options_.cache_dir + "/builds/.staging-" + build.sha256() + "-deadbeef";
  fs::create_directory_symlink(outside.path(), staging);
  auto cache = Cache();
  absl::StatusOr<CachedBuild> staged = cache->Stage(build, {}, kTimeLimit);
  ASSERT_THAT(staged, IsOk());
  EXPECT_FALSE(fs::is_symlink(staged->path));
  ExpectFilesAre(staged->path, files);
  EXPECT_EQ(ReadTextFile(outside.Sub("precious")), "keep me");
  EXPECT_FALSE(fs::exists(outside.Sub("config.json")));
  EXPECT_FALSE(fs::is_symlink(staging)) << "a stale staging name goes as the link it is";

  // A copy with a link to the outside in place of a file: incomplete,
  // swapped for a whole one; the outside file is untouched.
  fs::remove(staged->path + "/config.json");
  fs::create_symlink(outside.Sub("precious"), staged->path + "/config.json");
  ASSERT_THAT(cache->CheckCached(build), IsOk());
  EXPECT_FALSE(fs::is_symlink(staged->path + "/config.json"));
  ExpectFilesAre(staged->path, files);
  EXPECT_EQ(ReadTextFile(outside.Sub("precious")), "keep me");

  // Eviction: links under the agent's names go as links.
  fs::create_symlink(outside.Sub("precious"), BlobPath(std::string(64, 'a')));
  fs::create_directory_symlink(outside.path(), options_.cache_dir + "/builds/" + std::string(64, 'b'));
  ASSERT_THAT(cache->Collect({}), IsOk());
  EXPECT_EQ(ReadTextFile(outside.Sub("precious")), "keep me");
  EXPECT_TRUE(fs::exists(outside.Sub("precious")));
  EXPECT_FALSE(fs::exists(staged->path));
}

TEST_F(AgentBuildCache, CollectRemovesWhatNoKeptBuildHoldsDownToTheLimits) {
  const v1::Artifact old_build = Build("old", {{"a.safetensors", Safetensors(1 << 20, 80)}});
  const v1::Artifact kept = Build("kept", {{"a.safetensors", Safetensors(1 << 20, 81)}});
  auto cache = Cache();
  ASSERT_THAT(cache->Stage(old_build, {}, kTimeLimit), IsOk());
  ASSERT_THAT(cache->Stage(kept, {}, kTimeLimit), IsOk());
  const std::string abandoned = BlobPath(std::string(64, 'c')) + ".partial";
  WriteTextFile(abandoned, "stale");
  fs::last_write_time(abandoned, fs::file_time_type::clock::now() - std::chrono::hours(25));
  const std::string resumable = BlobPath(std::string(64, 'd')) + ".partial";
  WriteTextFile(resumable, "a later attempt resumes this");
  // No limit: the directory of the build not kept and the abandoned partial
  // go, its blob stays (a rollback re-links it), and so does a partial
  // download of today, which the next attempt resumes.
  ASSERT_THAT(cache->Collect({&kept}), IsOk());
  EXPECT_FALSE(fs::exists(BuildPath(old_build)));
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(resumable));
  EXPECT_TRUE(fs::exists(BlobPath(old_build.files(0).sha256())));
  EXPECT_THAT(cache->CheckCached(old_build), IsOk());
  // Over the limit: the partial and the blob go too; the kept build stays
  // whole.
  options_.max_bytes = (1 << 20) + (1 << 19);
  absl::StatusOr<uint64_t> freed = Cache()->Collect({&kept});
  ASSERT_THAT(freed, IsOk());
  EXPECT_GE(*freed, uint64_t{1} << 20);
  EXPECT_FALSE(fs::exists(resumable));
  EXPECT_FALSE(fs::exists(BlobPath(old_build.files(0).sha256())));
  EXPECT_THAT(cache->CheckCached(kept), IsOk());
}

// A process killed with SIGKILL in the middle of a parallel download: the
// next Stage resumes every file from its partial file (Range) and fetches
// only the bytes still missing.
TEST_F(AgentBuildCache, KilledMidDownloadResumesWithOnlyTheMissingBytes) {
  const Files files = {{"a.safetensors", Safetensors(1 << 20, 90)},
                       {"b.safetensors", Safetensors(1 << 20, 91)}};
  const v1::Artifact slow = Build("kill", files, "?trickle=65536");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    (void)MakeBuildCache(options_, SystemClockInstance())->Stage(slow, {}, kTimeLimit);
    ::_exit(0);
  }
  // Wait until both partial files hold bytes, then kill.
  uint64_t partial_bytes = 0;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    uint64_t both = 0;
    int present = 0;
    for (const v1::BuildFile& file : slow.files()) {
      std::error_code error;
      const uintmax_t size = fs::file_size(BlobPath(file.sha256()) + ".partial", error);
      if (!error && size >= 3 * 65536) {
        ++present;
        both += size;
      }
    }
    if (present == 2) {
      partial_bytes = both;
      break;
    }
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_GT(partial_bytes, 0u) << "the child never got far enough";
  uint64_t kept = 0;
  for (const v1::BuildFile& file : slow.files()) {
    kept += fs::file_size(BlobPath(file.sha256()) + ".partial");
  }
  v1::Artifact plain = slow;
  for (v1::BuildFile& file : *plain.mutable_files()) {
    file.set_uri(file.uri().substr(0, file.uri().find('?')));
  }
  absl::StatusOr<CachedBuild> resumed = Cache()->Stage(plain, {}, kTimeLimit);
  ASSERT_THAT(resumed, IsOk());
  const uint64_t total = files.at("a.safetensors").size() + files.at("b.safetensors").size();
  EXPECT_EQ(resumed->bytes_resumed, kept);
  EXPECT_EQ(resumed->bytes_transferred, total - kept);
  ExpectFilesAre(resumed->path, files);
  int ranged = 0;
  for (const std::string& line : server_->RequestLog()) {
    if (absl::StrContains(line, "range=bytes=") && absl::StrContains(line, "status=206")) ++ranged;
  }
  EXPECT_EQ(ranged, 2);
}

// A 4 MiB tmpfs as cache_dir, filled by something else after the room
// check: the write fails with ENOSPC, the error says so, the partial files
// go, and no build directory (nor staging one) is left.
TEST_F(AgentBuildCache, OutOfSpaceMidDownloadLeavesNoBuildDirectory) {
  fs::create_directories(options_.cache_dir);
  if (::mount("tmpfs", options_.cache_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=4m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(errno) << ")";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{options_.cache_dir};
  const Files files = {{"a.safetensors", Safetensors(1 << 20, 100)},
                       {"b.safetensors", Safetensors(1 << 20, 101)}};
  const v1::Artifact build = Build("full", files, "?delay_ms=400");
  absl::StatusOr<CachedBuild> staged = absl::UnknownError("not run");
  std::thread stage([&] { staged = Cache()->Stage(build, {}, kTimeLimit); });
  // The room check passed (the mirror waits 400 ms to answer); the volume
  // now fills up but for 64 KiB.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const int64_t free_bytes = FreeBytesOn(options_.cache_dir);
  ASSERT_GT(free_bytes, 2 << 20);
  WriteTextFile(options_.cache_dir + "/ballast", std::string(free_bytes - 65536, 'x'));
  stage.join();
  EXPECT_THAT(staged, StatusIs(absl::StatusCode::kResourceExhausted,
                               AllOf(HasSubstr("ENOSPC"), HasSubstr("artifact.files["),
                                     HasSubstr("was removed so the volume is not left full"))));
  EXPECT_FALSE(fs::exists(BuildPath(build)));
  for (const v1::BuildFile& file : build.files()) {
    EXPECT_FALSE(fs::exists(BlobPath(file.sha256()) + ".partial")) << file.path();
  }
  absl::StatusOr<CacheContents> contents = ScanCache(options_.cache_dir);
  ASSERT_THAT(contents, IsOk());
  EXPECT_THAT(contents->staging, IsEmpty());
  EXPECT_THAT(contents->builds, IsEmpty());
}

// Not a test: the figures of agent/README.md ("The build cache"). Run with
//   [WEIGHTPATH_BENCH_SHARD_MIB=64] agent_build_cache_tests
//     --gtest_also_run_disabled_tests --gtest_filter='*StageBenchmark'
// A build of 4 safetensors shards from the local mirror, staged with 4
// parallel downloads, against `curl` fetching the same files in parallel
// then `openssl dgst -sha256` over them, rounds alternating which goes
// first; the Stage's peak RSS (VmHWM, reset before it) and CPU seconds.
TEST_F(AgentBuildCache, DISABLED_StageBenchmark) {
  const char* mib_text = std::getenv("WEIGHTPATH_BENCH_SHARD_MIB");
  const size_t shard_mib = mib_text != nullptr ? std::strtoul(mib_text, nullptr, 10) : 64;
  Files small = {{"config.json", "{}"}};
  v1::Artifact build = Build("bench", small);
  std::string curl_args, files_list;
  for (int shard = 0; shard < 4; ++shard) {
    const std::string path = absl::StrCat("model-0000", shard + 1, "-of-00004.safetensors");
    const std::string local = served_.Sub("bench/" + path);
    {
      // Streamed to disk, 1 MiB at a time: the test's own memory stays small.
      std::ofstream out(local, std::ios::binary);
      const std::string header = Safetensors(0, 0);
      out << header;
      for (size_t mib = 0; mib < shard_mib; ++mib) {
        out << ArtifactBytes(1 << 20, static_cast<uint32_t>(shard * 100000 + mib));
      }
    }
    v1::BuildFile* file = build.add_files();
    file->set_path(path);
    file->set_sha256(Sha256OfFile(local).value());
    file->set_size_bytes(fs::file_size(local));
    file->set_uri(server_->Url("bench/" + path));
    absl::StrAppend(&curl_args, " -o ", work_.Sub("curl-" + path), " ", file->uri());
    absl::StrAppend(&files_list, " ", work_.Sub("curl-" + path));
  }
  const trust::BuildManifestDigest digest =
      trust::DigestBuildManifest(trust::ToBuildManifestFiles(build.files()));
  build.set_sha256(digest.sha256);
  build.set_size_bytes(digest.size_bytes);
  const std::string curl_then_hash = absl::StrCat("curl -s --parallel --parallel-max 4", curl_args,
                                                  " && openssl dgst -sha256", files_list,
                                                  " >/dev/null");
  auto VmKib = [](absl::string_view key) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (absl::StartsWith(line, key)) return std::strtol(line.c_str() + key.size(), nullptr, 10);
    }
    return 0L;
  };
  auto seconds = [](absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); };
  for (int round = 0; round < 2; ++round) {
    double curl_s = 0, stage_s = 0, stage_cpu = 0;
    long hwm_kib = 0, rss_before_kib = 0;
    for (int arm = 0; arm < 2; ++arm) {
      if ((arm == 0) == (round % 2 == 0)) {
        const absl::Time start = absl::Now();
        ASSERT_EQ(std::system(curl_then_hash.c_str()), 0);
        curl_s = seconds(start);
        for (absl::string_view name : absl::StrSplit(files_list.substr(1), ' ')) {
          fs::remove(std::string(name));
        }
      } else {
        fs::remove_all(options_.cache_dir);
        std::ofstream("/proc/self/clear_refs") << "5";
        rss_before_kib = VmKib("VmRSS:");
        struct rusage before, after;
        ::getrusage(RUSAGE_SELF, &before);
        const absl::Time start = absl::Now();
        ASSERT_THAT(Cache()->Stage(build, {}, absl::Minutes(10)), IsOk());
        stage_s = seconds(start);
        ::getrusage(RUSAGE_SELF, &after);
        auto cpu = [](const struct rusage& usage) {
          return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                 (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
        };
        stage_cpu = cpu(after) - cpu(before);
        hwm_kib = VmKib("VmHWM:");
      }
    }
    std::printf("round %d: %zu MiB x4: Stage %.2f s (CPU %.2f s, process peak RSS %ld KiB, %ld before); "
                "curl --parallel + openssl dgst %.2f s; ratio %.2f\n",
                round, shard_mib, stage_s, stage_cpu, hwm_kib, rss_before_kib, curl_s, stage_s / curl_s);
  }
}

}  // namespace
}  // namespace weightpath::agent
