#include "agent/fetch/artifact_fetcher.h"

#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/fake_clock.h"
#include "tests/agent/range_http_server.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using testing::ArtifactBytes;
using testing::RangeHttpServer;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteArtifact;
using testing::WriteTextFile;
using weightpath::testing::IsOk;
using weightpath::testing::StatusIs;

namespace fs = std::filesystem;

constexpr size_t kArtifactBytes = 300'000;
constexpr absl::Duration kTimeLimit = absl::Seconds(30);

class AgentArtifactFetcher : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(served_.path());
    absl::StatusOr<std::unique_ptr<RangeHttpServer>> server =
        RangeHttpServer::Start(served_.path(), work_.path());
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
  }

  // An artifact the HTTP server serves as /<name>.
  v1::Artifact Served(const std::string& name, uint32_t seed, size_t size = kArtifactBytes) {
    return WriteArtifact(served_.Sub(name), ArtifactBytes(size, seed), server_->Url(name));
  }

  std::string Cached(const v1::Artifact& artifact) const { return cache_.Sub(artifact.sha256()); }
  std::string Partial(const v1::Artifact& artifact) const { return Cached(artifact) + ".partial"; }

  TempDir served_;
  TempDir work_;
  TempDir cache_;
  std::unique_ptr<RangeHttpServer> server_;
};

TEST_F(AgentArtifactFetcher, DownloadsVerifiesAndInstallsUnderTheDigest) {
  const v1::Artifact artifact = Served("w4a8-amx.bin", 1);
  ArtifactFetcher fetcher(cache_.path());
  absl::StatusOr<FetchResult> result = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(result, IsOk());
  EXPECT_TRUE(result->downloaded);
  EXPECT_EQ(result->path, Cached(artifact));
  EXPECT_EQ(result->bytes_transferred, kArtifactBytes);
  EXPECT_EQ(ReadTextFile(result->path), ArtifactBytes(kArtifactBytes, 1));
  EXPECT_FALSE(fs::exists(Partial(artifact)));
}

TEST_F(AgentArtifactFetcher, VerifiedCachedArtifactIsNotFetchedAgain) {
  const v1::Artifact artifact = Served("bf16.bin", 2);
  ArtifactFetcher fetcher(cache_.path());
  ASSERT_THAT(fetcher.Fetch(artifact, kTimeLimit), IsOk());
  absl::StatusOr<FetchResult> again = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(again->downloaded);
  EXPECT_EQ(again->bytes_transferred, 0u);
  EXPECT_THAT(server_->RequestLog(), SizeIs(1));
}

TEST_F(AgentArtifactFetcher, InterruptedDownloadResumesWithARangeRequest) {
  v1::Artifact artifact = Served("w4a16.bin", 3);
  const std::string plain_uri = artifact.uri();
  ArtifactFetcher fetcher(cache_.path());

  artifact.set_uri(plain_uri + "?cut_after=120000");  // the connection drops mid-body
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("interrupted"), HasSubstr("120000 of 300000"))));
  EXPECT_EQ(fs::file_size(Partial(artifact)), 120000u);
  EXPECT_FALSE(fs::exists(Cached(artifact)));

  artifact.set_uri(plain_uri);
  absl::StatusOr<FetchResult> resumed = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(resumed, IsOk());
  EXPECT_EQ(resumed->resumed_from, 120000u);
  EXPECT_EQ(resumed->bytes_transferred, kArtifactBytes - 120000);
  EXPECT_EQ(ReadTextFile(resumed->path), ArtifactBytes(kArtifactBytes, 3));
  EXPECT_THAT(server_->RequestLog(),
              ElementsAre(HasSubstr("range=- status=200 bytes=120000"),
                          HasSubstr("range=bytes=120000- status=206 bytes=180000")));
}

TEST_F(AgentArtifactFetcher, CorruptArtifactIsRejectedAndThePreviousGoodOneKept) {
  ArtifactFetcher fetcher(cache_.path());
  const v1::Artifact good = Served("good.bin", 4);
  ASSERT_THAT(fetcher.Fetch(good, kTimeLimit), IsOk());

  v1::Artifact corrupt = Served("new.bin", 5);
  std::string flipped = ArtifactBytes(kArtifactBytes, 5);
  flipped[kArtifactBytes / 2] ^= 0x01;
  WriteTextFile(served_.Sub("new.bin"), flipped);  // the catalog's digest no longer matches
  EXPECT_THAT(fetcher.Fetch(corrupt, kTimeLimit),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("corrupted"), HasSubstr(corrupt.sha256()))));
  EXPECT_FALSE(fs::exists(Cached(corrupt)));
  EXPECT_FALSE(fs::exists(Partial(corrupt)));
  EXPECT_THAT(fetcher.VerifyCached(good), IsOk());
}

TEST_F(AgentArtifactFetcher, TruncatedSourceIsRejected) {
  v1::Artifact artifact = Served("short.bin", 6);
  WriteTextFile(served_.Sub("short.bin"), ArtifactBytes(kArtifactBytes - 1000, 6));
  ArtifactFetcher fetcher(cache_.path());
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("truncated"), HasSubstr("299000 bytes"))));
  EXPECT_FALSE(fs::exists(Cached(artifact)));
  EXPECT_FALSE(fs::exists(Partial(artifact)));
}

// A partial file longer than what the source now has cannot be resumed
// (416); the fetch starts over, and the short source is then caught.
TEST_F(AgentArtifactFetcher, PartialLongerThanTheSourceStartsOverAndIsRejected) {
  v1::Artifact artifact = Served("shrunk.bin", 15);
  WriteTextFile(Partial(artifact), ArtifactBytes(kArtifactBytes, 15).substr(0, 150000));
  WriteTextFile(served_.Sub("shrunk.bin"), ArtifactBytes(100000, 15));
  ArtifactFetcher fetcher(cache_.path());
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("truncated"), HasSubstr("100000 bytes"))));
  EXPECT_FALSE(fs::exists(Partial(artifact)));
  EXPECT_THAT(server_->RequestLog(),
              ElementsAre(HasSubstr("range=bytes=150000- status=416"),
                          HasSubstr("range=- status=200 bytes=100000")));
}

TEST_F(AgentArtifactFetcher, OversizedSourceIsCutOffAndRejected) {
  v1::Artifact artifact = Served("long.bin", 7);
  WriteTextFile(served_.Sub("long.bin"), ArtifactBytes(kArtifactBytes * 2, 7));
  ArtifactFetcher fetcher(cache_.path());
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("larger than artifact.size_bytes")));
  EXPECT_FALSE(fs::exists(Partial(artifact)));
}

TEST_F(AgentArtifactFetcher, CachedCopyDamagedOnDiskIsDeletedAndFetchedAgain) {
  const v1::Artifact artifact = Served("fp16.bin", 8);
  ArtifactFetcher fetcher(cache_.path());
  ASSERT_THAT(fetcher.Fetch(artifact, kTimeLimit), IsOk());
  std::string damaged = ArtifactBytes(kArtifactBytes, 8);
  damaged[0] ^= 0x40;
  WriteTextFile(Cached(artifact), damaged);
  EXPECT_THAT(fetcher.VerifyCached(artifact),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("corrupted")));
  EXPECT_FALSE(fs::exists(Cached(artifact)));
  absl::StatusOr<FetchResult> refetched = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(refetched, IsOk());
  EXPECT_TRUE(refetched->downloaded);
  EXPECT_THAT(server_->RequestLog(), SizeIs(2));
}

TEST_F(AgentArtifactFetcher, MissingSourceIsNotFound) {
  v1::Artifact artifact = Served("there.bin", 9);
  artifact.set_uri(server_->Url("not-there.bin"));
  ArtifactFetcher fetcher(cache_.path());
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("artifact.uri"), HasSubstr("404"))));
}

TEST_F(AgentArtifactFetcher, FileUriIsCopiedAndVerified) {
  TempDir local;
  const std::string path = local.Sub("export-qnn.bin");
  const v1::Artifact artifact =
      WriteArtifact(path, ArtifactBytes(kArtifactBytes, 10), "file://" + path);
  ArtifactFetcher fetcher(cache_.path());
  absl::StatusOr<FetchResult> result = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(result, IsOk());
  EXPECT_TRUE(result->downloaded);
  EXPECT_EQ(ReadTextFile(result->path), ArtifactBytes(kArtifactBytes, 10));
  EXPECT_THAT(server_->RequestLog(), SizeIs(0));
}

TEST_F(AgentArtifactFetcher, FileUriResumesFromAPartialFile) {
  TempDir local;
  const std::string path = local.Sub("resume.bin");
  const std::string bytes = ArtifactBytes(kArtifactBytes, 11);
  const v1::Artifact artifact = WriteArtifact(path, bytes, "file://" + path);
  WriteTextFile(Partial(artifact), bytes.substr(0, 1000));
  ArtifactFetcher fetcher(cache_.path());
  absl::StatusOr<FetchResult> result = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->resumed_from, 1000u);
  EXPECT_EQ(ReadTextFile(result->path), bytes);
}

TEST_F(AgentArtifactFetcher, MissingFileUriIsNotFound) {
  v1::Artifact artifact = Served("x.bin", 12);
  artifact.set_uri("file://" + served_.Sub("absent.bin"));
  ArtifactFetcher fetcher(cache_.path());
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("artifact.uri")));
}

TEST_F(AgentArtifactFetcher, MalformedEntriesNameTheField) {
  ArtifactFetcher fetcher(cache_.path());
  v1::Artifact artifact = Served("y.bin", 13);
  v1::Artifact bad_scheme = artifact;
  bad_scheme.set_uri("ftp://mirror/y.bin");
  EXPECT_THAT(fetcher.Fetch(bad_scheme, kTimeLimit),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("artifact.uri")));
  v1::Artifact bad_digest = artifact;
  bad_digest.set_sha256("ABC");
  EXPECT_THAT(fetcher.Fetch(bad_digest, kTimeLimit),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("artifact.sha256")));
  v1::Artifact no_size = artifact;
  no_size.set_size_bytes(0);
  EXPECT_THAT(fetcher.Fetch(no_size, kTimeLimit),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("artifact.size_bytes")));
  EXPECT_THAT(server_->RequestLog(), SizeIs(0));
}

TEST_F(AgentArtifactFetcher, NoTimeLeftIsDeadlineExceededBeforeAnyRequest) {
  ArtifactFetcher fetcher(cache_.path());
  EXPECT_THAT(fetcher.Fetch(Served("z.bin", 14), absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("no time left")));
  EXPECT_THAT(server_->RequestLog(), SizeIs(0));
}

// A FIFO behind file:// used to keep the agent waiting in libcurl's
// blocking open() long past its budget. It is refused at once, and no
// partial file is left for it.
TEST_F(AgentArtifactFetcher, FileUriNamingAFifoIsRefusedAtOnce) {
  TempDir local;
  ASSERT_EQ(::mkfifo(local.Sub("artifact.fifo").c_str(), 0600), 0);
  v1::Artifact artifact = Served("fifo.bin", 20);
  artifact.set_uri("file://" + local.Sub("artifact.fifo"));
  ArtifactFetcher fetcher(cache_.path());
  const absl::Time start = absl::Now();
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("artifact.uri"), HasSubstr("is a FIFO, not a regular file"))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_FALSE(fs::exists(Partial(artifact)));
}

TEST_F(AgentArtifactFetcher, FileUriNamingADeviceOrADirectoryIsRefused) {
  v1::Artifact artifact = Served("dev.bin", 21);
  ArtifactFetcher fetcher(cache_.path());
  artifact.set_uri("file:///dev/zero");
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a character device")));
  artifact.set_uri("file://" + served_.path());
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a directory")));
}

// The forms libcurl accepted keep working: a localhost authority, %-escapes.
TEST_F(AgentArtifactFetcher, FileUriWithLocalhostAndEscapesIsRead) {
  TempDir local;
  const std::string path = local.Sub("with space.bin");
  const v1::Artifact written =
      WriteArtifact(path, ArtifactBytes(kArtifactBytes, 22), "file://" + path);
  v1::Artifact artifact = written;
  artifact.set_uri("file://localhost" + absl::StrReplaceAll(path, {{" ", "%20"}}));
  ArtifactFetcher fetcher(cache_.path());
  absl::StatusOr<FetchResult> result = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(ReadTextFile(result->path), ArtifactBytes(kArtifactBytes, 22));

  artifact.set_uri("file://mirror.example" + path);
  EXPECT_THAT(ArtifactFetcher(work_.path()).Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names another host")));
  artifact.set_uri("file://" + path + "%0");
  EXPECT_THAT(ArtifactFetcher(work_.path()).Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed %-escape")));
}

TEST_F(AgentArtifactFetcher, FileUriLargerThanTheArtifactIsRejected) {
  TempDir local;
  const std::string path = local.Sub("long.bin");
  v1::Artifact artifact = WriteArtifact(path, ArtifactBytes(kArtifactBytes, 23), "file://" + path);
  WriteTextFile(path, ArtifactBytes(kArtifactBytes * 2, 23));
  ArtifactFetcher fetcher(cache_.path());
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("larger than artifact.size_bytes")));
  EXPECT_FALSE(fs::exists(Partial(artifact)));
}

// The limit holds inside a local copy too: measured on the monotonic
// clock between chunks, the copy stops with its bytes kept and resumes.
TEST_F(AgentArtifactFetcher, FileUriCopyStopsAtTheTimeLimitAndResumes) {
  TempDir local;
  const std::string path = local.Sub("big.bin");
  const size_t size = 5 << 20;  // five chunks
  const v1::Artifact artifact = WriteArtifact(path, ArtifactBytes(size, 24), "file://" + path);
  testing::FakeClock clock;
  clock.TickOnEveryReading(absl::Seconds(1));
  ArtifactFetcher fetcher(cache_.path(), &clock, kDefaultReverifyAfter);
  EXPECT_THAT(fetcher.Fetch(artifact, absl::Seconds(4)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("ran out of time"), HasSubstr("kept for resume"))));
  const uint64_t kept = fs::file_size(Partial(artifact));
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, size);
  clock.TickOnEveryReading(absl::ZeroDuration());
  absl::StatusOr<FetchResult> resumed = fetcher.Fetch(artifact, absl::Seconds(4));
  ASSERT_THAT(resumed, IsOk());
  EXPECT_EQ(resumed->resumed_from, kept);
  EXPECT_EQ(ReadTextFile(resumed->path), ArtifactBytes(size, 24));
}

// A mirror that sends part of the body and then nothing: libcurl's own
// timeout ends the transfer at the limit, and the bytes stay for a resume.
TEST_F(AgentArtifactFetcher, StalledHttpTransferEndsAtTheTimeLimit) {
  v1::Artifact artifact = Served("stall.bin", 25);
  artifact.set_uri(artifact.uri() + "?stall_after=100000");
  ArtifactFetcher fetcher(cache_.path());
  const absl::Time start = absl::Now();
  EXPECT_THAT(fetcher.Fetch(artifact, absl::Milliseconds(1500)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("100000 of 300000")));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(1400));
  EXPECT_LT(took, absl::Seconds(4));
  EXPECT_EQ(fs::file_size(Partial(artifact)), 100000u);
}

// The partial file is the agent's own; a FIFO in its place (which a write
// open would block on) is removed and the download starts afresh.
TEST_F(AgentArtifactFetcher, PartialFileThatIsNotARegularFileIsReplaced) {
  const v1::Artifact artifact = Served("partial.bin", 26);
  fs::create_directories(cache_.path());
  ASSERT_EQ(::mkfifo(Partial(artifact).c_str(), 0600), 0);
  ArtifactFetcher fetcher(cache_.path());
  absl::StatusOr<FetchResult> result = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->resumed_from, 0u);
  EXPECT_EQ(ReadTextFile(result->path), ArtifactBytes(kArtifactBytes, 26));
}

// A mirror answering 500 sends no artifact bytes: nothing is left behind
// (the partial file used to stay, empty), and a partial file from before
// keeps its bytes for the next resume.
TEST_F(AgentArtifactFetcher, ServerErrorLeavesNoEmptyPartialAndKeepsEarlierBytes) {
  v1::Artifact artifact = Served("error.bin", 27);
  const std::string honest_uri = artifact.uri();
  artifact.set_uri(honest_uri + "?status=500");
  ArtifactFetcher fetcher(cache_.path());
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("answered HTTP 500")));
  EXPECT_FALSE(fs::exists(Partial(artifact)));

  WriteTextFile(Partial(artifact), ArtifactBytes(kArtifactBytes, 27).substr(0, 1000));
  EXPECT_THAT(fetcher.Fetch(artifact, kTimeLimit),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("answered HTTP 500"), HasSubstr("1000 of 300000"),
                             HasSubstr("kept for resume"))));
  EXPECT_EQ(ReadTextFile(Partial(artifact)), ArtifactBytes(kArtifactBytes, 27).substr(0, 1000));
  artifact.set_uri(honest_uri);
  absl::StatusOr<FetchResult> resumed = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(resumed, IsOk());
  EXPECT_EQ(resumed->resumed_from, 1000u);
  EXPECT_EQ(ReadTextFile(resumed->path), ArtifactBytes(kArtifactBytes, 27));
}

// A Content-Length longer than the artifact, and the connection closed after
// its last byte: libcurl calls the transfer partial, but every byte is here
// and the digest vouches for them (it used to fall back, keeping them).
TEST_F(AgentArtifactFetcher, TransferCutAfterTheLastByteIsVerifiedAndInstalled) {
  v1::Artifact artifact = Served("claims-more.bin", 28);
  artifact.set_uri(absl::StrCat(artifact.uri(), "?claim_length=", kArtifactBytes + 1000));
  ArtifactFetcher fetcher(cache_.path());
  absl::StatusOr<FetchResult> result = fetcher.Fetch(artifact, kTimeLimit);
  ASSERT_THAT(result, IsOk());
  EXPECT_TRUE(result->downloaded);
  EXPECT_EQ(ReadTextFile(result->path), ArtifactBytes(kArtifactBytes, 28));
  EXPECT_FALSE(fs::exists(Partial(artifact)));

  // The same with bytes that are not the artifact's: refused, and gone.
  v1::Artifact wrong = Served("claims-more-wrong.bin", 29);
  WriteTextFile(served_.Sub("claims-more-wrong.bin"), ArtifactBytes(kArtifactBytes, 30));
  wrong.set_uri(absl::StrCat(wrong.uri(), "?claim_length=", kArtifactBytes + 1000));
  EXPECT_THAT(fetcher.Fetch(wrong, kTimeLimit),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("is corrupted")));
  EXPECT_FALSE(fs::exists(Cached(wrong)));
  EXPECT_FALSE(fs::exists(Partial(wrong)));
}

}  // namespace
}  // namespace weightpath::agent
