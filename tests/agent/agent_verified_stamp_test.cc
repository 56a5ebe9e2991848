// The verified stamp that lets a boot skip re-hashing a cached artifact:
// trusted only while the file's identity is unchanged and the stamp is
// young; every edit, truncation or replacement is still caught.
#include "agent/fetch/verified_stamp.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

#include "agent/fetch/artifact_fetcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/fake_clock.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::HasSubstr;
using testing::ArtifactBytes;
using testing::FakeClock;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteArtifact;
using testing::WriteTextFile;
using weightpath::testing::IsOk;
using weightpath::testing::StatusIs;

namespace fs = std::filesystem;

constexpr size_t kArtifactBytes = 64 * 1024;
constexpr absl::Duration kReverifyAfter = absl::Hours(7 * 24);

struct timespec MtimeOf(const std::string& path) {
  struct stat info;
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mtim;
}

void RestoreMtime(const std::string& path, const struct timespec& mtime) {
  const struct timespec times[2] = {mtime, mtime};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

class AgentVerifiedStamp : public ::testing::Test {
 protected:
  // An artifact placed straight into the cache, as a finished download
  // leaves it, and old enough (by the kernel's clock, which no test can
  // inject) that its ctime can be stamped.
  v1::Artifact PlaceInCache(uint32_t seed) {
    const v1::Artifact artifact =
        WriteArtifact(work_.Sub("source.bin"), ArtifactBytes(kArtifactBytes, seed), "file:///x");
    fs::create_directories(cache_.path());
    fs::rename(work_.Sub("source.bin"), Cached(artifact));
    LetCtimeSettle();
    return artifact;
  }

  // ChangedTooRecentlyToStamp refuses files changed within its 50 ms
  // window; waiting it out is the only way to age a real ctime.
  static void LetCtimeSettle() { std::this_thread::sleep_for(std::chrono::milliseconds(60)); }

  std::string Cached(const v1::Artifact& artifact) const { return cache_.Sub(artifact.sha256()); }
  std::string Stamp(const v1::Artifact& artifact) const {
    return StampPathFor(Cached(artifact));
  }

  TempDir work_;
  TempDir cache_;
  FakeClock clock_;
  ArtifactFetcher fetcher_{cache_.path(), &clock_, kReverifyAfter};
};

TEST_F(AgentVerifiedStamp, FirstCheckHashesAndStampsTheNextTrustsTheStamp) {
  const v1::Artifact artifact = PlaceInCache(1);
  absl::StatusOr<CachedArtifact> first = fetcher_.CheckCached(artifact);
  ASSERT_THAT(first, IsOk());
  EXPECT_TRUE(first->hashed);
  absl::StatusOr<VerifiedStamp> stamp = ReadStamp(Stamp(artifact));
  ASSERT_THAT(stamp, IsOk());
  EXPECT_EQ(stamp->sha256, artifact.sha256());
  EXPECT_EQ(stamp->identity, StatFileIdentity(Cached(artifact)).value());
  EXPECT_EQ(stamp->verified_at, clock_.Now());

  absl::StatusOr<CachedArtifact> second = fetcher_.CheckCached(artifact);
  ASSERT_THAT(second, IsOk());
  EXPECT_FALSE(second->hashed);
  EXPECT_EQ(second->path, Cached(artifact));
}

TEST_F(AgentVerifiedStamp, SameSizeEditWithMtimeRestoredIsCaughtByItsCtime) {
  const v1::Artifact artifact = PlaceInCache(2);
  ASSERT_THAT(fetcher_.CheckCached(artifact), IsOk());
  const struct timespec mtime = MtimeOf(Cached(artifact));
  const int fd = ::open(Cached(artifact).c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char flipped = static_cast<char>(ArtifactBytes(kArtifactBytes, 2)[100] ^ 0x01);
  ASSERT_EQ(::pwrite(fd, &flipped, 1, 100), 1);
  ::close(fd);
  RestoreMtime(Cached(artifact), mtime);

  EXPECT_THAT(fetcher_.CheckCached(artifact),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("corrupted")));
  EXPECT_FALSE(fs::exists(Cached(artifact)));
  EXPECT_FALSE(fs::exists(Stamp(artifact)));
}

TEST_F(AgentVerifiedStamp, TruncatedFileIsCaughtBySize) {
  const v1::Artifact artifact = PlaceInCache(3);
  ASSERT_THAT(fetcher_.CheckCached(artifact), IsOk());
  fs::resize_file(Cached(artifact), kArtifactBytes - 1);
  EXPECT_THAT(fetcher_.CheckCached(artifact),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("artifact.size_bytes")));
  EXPECT_FALSE(fs::exists(Cached(artifact)));
  EXPECT_FALSE(fs::exists(Stamp(artifact)));
}

TEST_F(AgentVerifiedStamp, TruncatedAndRegrownToTheSameSizeIsCaughtByHashing) {
  const v1::Artifact artifact = PlaceInCache(4);
  ASSERT_THAT(fetcher_.CheckCached(artifact), IsOk());
  const struct timespec mtime = MtimeOf(Cached(artifact));
  fs::resize_file(Cached(artifact), kArtifactBytes / 2);
  fs::resize_file(Cached(artifact), kArtifactBytes);  // the tail is now zeros
  RestoreMtime(Cached(artifact), mtime);
  EXPECT_THAT(fetcher_.CheckCached(artifact),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("corrupted")));
}

TEST_F(AgentVerifiedStamp, ReplacedFileIsHashedAgain) {
  const v1::Artifact artifact = PlaceInCache(5);
  ASSERT_THAT(fetcher_.CheckCached(artifact), IsOk());
  const struct timespec mtime = MtimeOf(Cached(artifact));

  // The same bytes under a new inode verify, after a full hash.
  WriteTextFile(work_.Sub("same.bin"), ArtifactBytes(kArtifactBytes, 5));
  RestoreMtime(work_.Sub("same.bin"), mtime);
  fs::rename(work_.Sub("same.bin"), Cached(artifact));
  absl::StatusOr<CachedArtifact> same = fetcher_.CheckCached(artifact);
  ASSERT_THAT(same, IsOk());
  EXPECT_TRUE(same->hashed);

  // Other bytes of the same size, with the old mtime, are caught.
  std::string other = ArtifactBytes(kArtifactBytes, 5);
  other[kArtifactBytes - 1] ^= 0x10;
  WriteTextFile(work_.Sub("other.bin"), other);
  RestoreMtime(work_.Sub("other.bin"), mtime);
  fs::rename(work_.Sub("other.bin"), Cached(artifact));
  EXPECT_THAT(fetcher_.CheckCached(artifact),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("corrupted")));
}

TEST_F(AgentVerifiedStamp, MissingOrGarbledStampIsHashedAndRewritten) {
  const v1::Artifact artifact = PlaceInCache(6);
  ASSERT_THAT(fetcher_.CheckCached(artifact), IsOk());

  fs::remove(Stamp(artifact));
  absl::StatusOr<CachedArtifact> without_stamp = fetcher_.CheckCached(artifact);
  ASSERT_THAT(without_stamp, IsOk());
  EXPECT_TRUE(without_stamp->hashed);
  EXPECT_THAT(ReadStamp(Stamp(artifact)), IsOk());

  const std::string whole = ReadTextFile(Stamp(artifact));
  WriteTextFile(Stamp(artifact), whole.substr(0, whole.size() / 2));  // torn
  absl::StatusOr<CachedArtifact> torn = fetcher_.CheckCached(artifact);
  ASSERT_THAT(torn, IsOk());
  EXPECT_TRUE(torn->hashed);
  EXPECT_EQ(ReadTextFile(Stamp(artifact)), whole);
}

TEST_F(AgentVerifiedStamp, StampForAnotherDigestIsNotTrusted) {
  const v1::Artifact artifact = PlaceInCache(7);
  VerifiedStamp forged{std::string(64, 'a'), StatFileIdentity(Cached(artifact)).value(),
                       clock_.Now()};
  ASSERT_THAT(WriteStamp(Stamp(artifact), forged), IsOk());
  absl::StatusOr<CachedArtifact> checked = fetcher_.CheckCached(artifact);
  ASSERT_THAT(checked, IsOk());
  EXPECT_TRUE(checked->hashed);
  EXPECT_EQ(ReadStamp(Stamp(artifact))->sha256, artifact.sha256());
}

TEST_F(AgentVerifiedStamp, StampReachingReverifyAfterForcesAFullHash) {
  const v1::Artifact artifact = PlaceInCache(8);
  ASSERT_THAT(fetcher_.CheckCached(artifact), IsOk());
  clock_.Advance(kReverifyAfter - absl::Seconds(1));
  EXPECT_FALSE(fetcher_.CheckCached(artifact)->hashed);
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(fetcher_.CheckCached(artifact)->hashed);
  // The full hash restarted the stamp's age.
  EXPECT_EQ(ReadStamp(Stamp(artifact))->verified_at, clock_.Now());
  EXPECT_FALSE(fetcher_.CheckCached(artifact)->hashed);
}

TEST_F(AgentVerifiedStamp, ClockBeforeTheStampForcesAFullHash) {
  const v1::Artifact artifact = PlaceInCache(9);
  ASSERT_THAT(fetcher_.CheckCached(artifact), IsOk());
  FakeClock unset_clock(absl::FromUnixSeconds(0));
  ArtifactFetcher after_clock_reset(cache_.path(), &unset_clock, kReverifyAfter);
  EXPECT_TRUE(after_clock_reset.CheckCached(artifact)->hashed);
}

TEST_F(AgentVerifiedStamp, FetchReportsWhetherTheCachedCopyWasHashed) {
  const v1::Artifact artifact = PlaceInCache(10);
  absl::StatusOr<FetchResult> first = fetcher_.Fetch(artifact, absl::Seconds(5));
  ASSERT_THAT(first, IsOk());
  EXPECT_FALSE(first->downloaded);
  EXPECT_TRUE(first->hashed);
  absl::StatusOr<FetchResult> second = fetcher_.Fetch(artifact, absl::Seconds(5));
  ASSERT_THAT(second, IsOk());
  EXPECT_FALSE(second->hashed);
}

TEST(AgentVerifiedStampText, RoundTripsEveryField) {
  const VerifiedStamp stamp{std::string(64, 'b'), FileIdentity{1, -2, 3, 4, 5},
                            absl::FromUnixNanos(1'700'000'000'123'456'789)};
  absl::StatusOr<VerifiedStamp> parsed = ParseStamp(FormatStamp(stamp));
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->sha256, stamp.sha256);
  EXPECT_EQ(parsed->identity, stamp.identity);
  EXPECT_EQ(parsed->verified_at, stamp.verified_at);
}

TEST(AgentVerifiedStampText, GarbledStampNamesTheField) {
  const std::string good = FormatStamp(
      VerifiedStamp{std::string(64, 'c'), FileIdentity{1, 2, 3, 4, 5}, absl::UnixEpoch()});
  EXPECT_THAT(ParseStamp(""), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("sha256: missing")));
  EXPECT_THAT(ParseStamp("sha256 xyz\n"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("sha256: invalid value 'xyz'")));
  EXPECT_THAT(ParseStamp(good.substr(0, good.find("ctime_ns"))),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("ctime_ns: missing")));
  std::string bad_inode = good;
  bad_inode.replace(bad_inode.find("inode 4"), 7, "inode -4");
  EXPECT_THAT(ParseStamp(bad_inode),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("inode: invalid value '-4'")));
  EXPECT_THAT(ParseStamp(good + "extra 1\n"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("unexpected trailing content")));
  std::string renamed = good;
  renamed.replace(renamed.find("size"), 4, "bulk");
  EXPECT_THAT(ParseStamp(renamed),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("expected size, found 'bulk'")));
}

TEST(AgentVerifiedStampText, MissingStampIsNotFound) {
  EXPECT_THAT(ReadStamp("/nonexistent-weightpath-dir/x.verified"),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(AgentVerifiedStampRace, CtimeWithinTheClockTickWindowIsNotStamped) {
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  FileIdentity identity;
  identity.ctime_ns = absl::ToUnixNanos(now - absl::Milliseconds(10));
  EXPECT_TRUE(ChangedTooRecentlyToStamp(identity, now));
  identity.ctime_ns = absl::ToUnixNanos(now - absl::Seconds(1));
  EXPECT_FALSE(ChangedTooRecentlyToStamp(identity, now));
}

}  // namespace
}  // namespace weightpath::agent
