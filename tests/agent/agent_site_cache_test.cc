// weightpath-agent serve-cache as a client at the site meets it, and as an
// attacker does: the real binary on loopback, its upstream a real
// Range-capable HTTP server. Paths outside /blobs/sha256/<hex>, an upstream
// that sends other bytes under a digest, over-long request heads, more
// requests than it serves at once, a thousand idle connections, Range forms.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/fetch/sha256_file.h"
#include "agent/sitecache/site_cache.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/range_http_server.h"
#include "tests/agent/site_cache_process.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

#ifndef WEIGHTPATH_AGENT_BINARY
#error "the test target defines WEIGHTPATH_AGENT_BINARY"
#endif

namespace weightpath::agent {
namespace {

// How much the cache's memory may grow while it holds 1,100 idle
// connections. The weightpath-agent these tests start is built with this
// test's flags: under ASan its shadow and redzones come on top (4,232 KiB
// measured there).
#if defined(__SANITIZE_ADDRESS__)
#define WEIGHTPATH_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEIGHTPATH_TEST_UNDER_ASAN 1
#endif
#endif
#ifdef WEIGHTPATH_TEST_UNDER_ASAN
constexpr int64_t kIdleConnectionsMemoryKiB = 8 * 1024;
#else
constexpr int64_t kIdleConnectionsMemoryKiB = 4 * 1024;
#endif

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing::ArtifactBytes;
using testing::RangeHttpServer;
using testing::SiteCacheProcess;
using testing::TempDir;
using testing::WriteTextFile;
using ::weightpath::testing::IsOk;

namespace fs = std::filesystem;

std::string Sha256Of(const std::string& bytes) {
  Sha256Stream hash;
  hash.Update(bytes.data(), bytes.size());
  return *hash.FinishHex();
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<struct sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  struct timeval timeout = {20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

// Sends `request` as it is (no normalisation of the path, unlike curl) and
// returns the whole answer.
std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buffer[65536];
  for (ssize_t got; (got = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) {
    answer.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return answer;
}

std::string Get(int port, const std::string& target, const std::string& headers = "") {
  return Exchange(port, absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: cache\r\n", headers,
                                     "\r\n"));
}

// A field of /proc/PID/status, such as VmHWM (KiB) or Threads; -1 if absent.
int64_t ProcStatus(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (!absl::StartsWith(line, field + ":")) continue;
    const absl::string_view value =
        absl::StripAsciiWhitespace(absl::string_view(line).substr(field.size() + 1));
    int64_t number = 0;
    return absl::SimpleAtoi(absl::StripSuffix(value, " kB"), &number) ? number : -1;
  }
  return -1;
}

// Waits up to 10 s for the process to run `threads` threads.
bool WaitForThreads(pid_t pid, int64_t threads) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ProcStatus(pid, "Threads") != threads) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

std::string Body(const std::string& answer) {
  const size_t end = answer.find("\r\n\r\n");
  return end == std::string::npos ? "" : answer.substr(end + 4);
}

class AgentSiteCache : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(work_.Sub("origin/blobs/sha256"));
    blob_ = ArtifactBytes(3 * 1024 * 1024 + 17, 7);
    digest_ = Sha256Of(blob_);
    WriteTextFile(work_.Sub("origin/blobs/sha256/" + digest_), blob_);
    absl::StatusOr<std::unique_ptr<RangeHttpServer>> origin =
        RangeHttpServer::Start(work_.Sub("origin"), work_.path());
    ASSERT_THAT(origin, IsOk());
    origin_ = *std::move(origin);
  }

  void StartCache(const std::vector<std::string>& extra = {}) {
    absl::StatusOr<std::unique_ptr<SiteCacheProcess>> cache = SiteCacheProcess::Start(
        WEIGHTPATH_AGENT_BINARY, work_.Sub("store"), {origin_->Url("")}, work_.Sub("cache.err"),
        extra);
    ASSERT_THAT(cache, IsOk());
    cache_ = *std::move(cache);
  }

  std::string Metric(const std::string& name) {
    const std::string metrics = Body(Get(cache_->port(), "/metrics"));
    const std::string prefix = absl::StrCat("weightpath_site_cache_", name, " ");
    for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
      if (absl::StartsWith(line, prefix)) return std::string(line.substr(prefix.size()));
    }
    return "absent";
  }

  TempDir work_;
  std::string blob_;
  std::string digest_;
  std::unique_ptr<RangeHttpServer> origin_;
  std::unique_ptr<SiteCacheProcess> cache_;
};

TEST_F(AgentSiteCache, ServesABlobOnceFetchedWithRangesAndCoalescesMisses) {
  StartCache();
  const std::string target = "/blobs/sha256/" + digest_;
  std::vector<std::thread> clients;
  std::vector<std::string> answers(4);
  for (size_t i = 0; i < answers.size(); ++i) {
    clients.emplace_back([&, i] { answers[i] = Get(cache_->port(), target); });
  }
  for (std::thread& client : clients) client.join();
  for (const std::string& answer : answers) {
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 200"));
    EXPECT_EQ(Body(answer), blob_);
  }
  // One fetch of the whole blob from upstream for the four requests.
  int full_gets = 0;
  for (const std::string& line : origin_->RequestLog()) full_gets += absl::StrContains(line, "range=-");
  EXPECT_EQ(full_gets, 1);
  EXPECT_EQ(Metric("upstream_bytes_total"), absl::StrCat(blob_.size()));

  const std::string part = Get(cache_->port(), target, "Range: bytes=100-199\r\n");
  EXPECT_THAT(part, StartsWith("HTTP/1.1 206"));
  EXPECT_THAT(part, HasSubstr(absl::StrCat("Content-Range: bytes 100-199/", blob_.size())));
  EXPECT_EQ(Body(part), blob_.substr(100, 100));
  EXPECT_EQ(Body(Get(cache_->port(), target, "Range: bytes=-5\r\n")), blob_.substr(blob_.size() - 5));
  EXPECT_THAT(Get(cache_->port(), target, absl::StrCat("Range: bytes=", blob_.size(), "-\r\n")),
              StartsWith("HTTP/1.1 416"));
  // A number past 64 bits is no range this server takes: the whole blob.
  EXPECT_THAT(Get(cache_->port(), target, "Range: bytes=99999999999999999999999-\r\n"),
              StartsWith("HTTP/1.1 200"));
  const std::string head = Exchange(cache_->port(), "HEAD " + target + " HTTP/1.1\r\n\r\n");
  EXPECT_THAT(head, HasSubstr(absl::StrCat("Content-Length: ", blob_.size())));
  EXPECT_EQ(Body(head), "");
  EXPECT_EQ(Metric("misses_total"), "4");
}

TEST_F(AgentSiteCache, RefusesEveryPathOutsideTheBlobForm) {
  StartCache();
  std::string upper = digest_;
  absl::AsciiStrToUpper(&upper);
  for (const std::string& target :
       {std::string("/blobs/sha256/../../etc/passwd"), std::string("/etc/passwd"),
        std::string("/blobs/sha256/") + upper, std::string("/blobs/sha256/") + digest_.substr(1),
        std::string("/blobs/sha256/") + digest_ + "/", std::string("/blobs/sha256/") + digest_ + "?x=1",
        std::string("/blobs/sha256/") + digest_ + "%00", std::string("/blobs/sha512/") + digest_,
        std::string("//blobs/sha256/") + digest_, std::string("http://evil.example/blobs/sha256/") + digest_,
        std::string("/blobs/sha256/%2e%2e/%2e%2e/etc/passwd"), std::string("/")}) {
    SCOPED_TRACE(target);
    EXPECT_THAT(Get(cache_->port(), target), StartsWith("HTTP/1.1 404"));
  }
  // Nothing of those went upstream.
  EXPECT_TRUE(origin_->RequestLog().empty());
  EXPECT_THAT(Exchange(cache_->port(), "DELETE /blobs/sha256/" + digest_ + " HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(Get(cache_->port(), "/blobs/sha256/" + digest_, std::string(9000, 'x') + "\r\n"),
              StartsWith("HTTP/1.1 431"));
  EXPECT_THAT(Exchange(cache_->port(), "garbage\r\n\r\n"), StartsWith("HTTP/1.1 400"));
  // A blob no upstream has is 404 too.
  EXPECT_THAT(Get(cache_->port(), "/blobs/sha256/" + std::string(64, 'a')),
              StartsWith("HTTP/1.1 404"));
}

TEST_F(AgentSiteCache, AnUpstreamSendingOtherBytesIsRefusedNotKeptNotServed) {
  // The upstream holds other bytes of the same length under the digest.
  std::string wrong = blob_;
  wrong[wrong.size() / 2] ^= 0x01;
  WriteTextFile(work_.Sub("origin/blobs/sha256/" + digest_), wrong);
  StartCache();
  const std::string answer = Get(cache_->port(), "/blobs/sha256/" + digest_);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 502"));
  EXPECT_THAT(Body(answer), Not(HasSubstr(wrong.substr(0, 64))));
  EXPECT_FALSE(fs::exists(work_.Sub("store/" + digest_)));
  EXPECT_FALSE(fs::exists(work_.Sub("store/" + digest_ + ".partial")));
  EXPECT_EQ(Metric("refused_digests_total"), "1");
  // The upstream mended: the next request fetches and serves it.
  WriteTextFile(work_.Sub("origin/blobs/sha256/" + digest_), blob_);
  EXPECT_EQ(Body(Get(cache_->port(), "/blobs/sha256/" + digest_)), blob_);
}

TEST_F(AgentSiteCache, RequestsBeyondTheLimitBeingServedAreAnswered503) {
  // Already in the store, 32 MiB: far more than the socket buffers hold, so
  // a reader that takes nothing keeps its thread in sendfile.
  const std::string big = ArtifactBytes(32 * 1024 * 1024, 9);
  const std::string big_digest = Sha256Of(big);
  WriteTextFile(work_.Sub("store/" + big_digest), big);
  StartCache({"--max-connections", "2"});
  const int64_t idle_threads = ProcStatus(cache_->pid(), "Threads");
  std::vector<int> readers;
  for (int i = 0; i < 2; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    struct sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(cache_->port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<struct sockaddr*>(&address), sizeof(address)), 0);
    const std::string request = "GET /blobs/sha256/" + big_digest + " HTTP/1.1\r\n\r\n";
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    readers.push_back(fd);
  }
  ASSERT_TRUE(WaitForThreads(cache_->pid(), idle_threads + 2));
  const std::string busy = Get(cache_->port(), "/metrics");
  EXPECT_THAT(busy, StartsWith("HTTP/1.1 503"));
  EXPECT_EQ(Body(busy), "503 Service Unavailable\n");
  // The readers go mid-body (their unread bytes reset the connections):
  // their threads end, and the cache serves again. It used to die of the
  // SIGPIPE that sendfile raised.
  for (int fd : readers) ::close(fd);
  ASSERT_TRUE(WaitForThreads(cache_->pid(), idle_threads));
  EXPECT_THAT(Get(cache_->port(), "/metrics"), StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(Metric("refused_connections_total"), "1");
}

TEST_F(AgentSiteCache, IdleConnectionsTakeNoThreadNorMemory) {
  // 1,100 connections and the cache's own: more descriptors than a soft
  // limit of 1024 (the cache inherits this process's).
  constexpr int kIdle = 1100;
  struct rlimit files;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_max != RLIM_INFINITY && files.rlim_max < 2 * kIdle) {
    GTEST_SKIP() << "RLIMIT_NOFILE's hard limit " << files.rlim_max << " is under " << 2 * kIdle;
  }
  if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < 2 * kIdle) {
    files.rlim_cur = 2 * kIdle;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
  }
  StartCache({"--max-connections", "2"});
  const int64_t idle_threads = ProcStatus(cache_->pid(), "Threads");
  const int64_t rss_before = ProcStatus(cache_->pid(), "VmRSS");
  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = Connect(cache_->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    // Half say nothing, half start a request line and stop.
    if (i % 2 == 1) (void)::send(fd, "GET /blobs/sha256/", 18, MSG_NOSIGNAL);
    idle.push_back(fd);
  }
  // While they wait: a download is served (with --max-connections 2), no
  // thread is held for them, and memory stays where it was.
  EXPECT_EQ(Body(Get(cache_->port(), "/blobs/sha256/" + digest_)), blob_);
  EXPECT_LE(ProcStatus(cache_->pid(), "Threads"), idle_threads + 1);
  EXPECT_LT(ProcStatus(cache_->pid(), "VmHWM") - rss_before, kIdleConnectionsMemoryKiB);
  // At most 1024 wait: the oldest 77 (the 1,100 and the download's) went.
  EXPECT_EQ(Metric("idle_dropped_total"), "77");
  char byte;
  EXPECT_EQ(::recv(idle.front(), &byte, 1, 0), 0);
  struct pollfd newest = {idle.back(), POLLIN, 0};
  EXPECT_EQ(::poll(&newest, 1, 0), 0);
  for (int fd : idle) ::close(fd);
  EXPECT_EQ(Metric("refused_connections_total"), "0");
}

// The head limit, in process with a short one (the command's is 10 s).
TEST_F(AgentSiteCache, AHeadNotWholeWithinTheLimitIsClosedWithoutAnAnswer) {
  SiteCacheOptions options;
  options.listen = "127.0.0.1:0";
  options.cache_dir = work_.Sub("store");
  options.upstreams = {origin_->Url("")};
  options.header_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<SiteCache>> cache = StartSiteCache(options);
  ASSERT_THAT(cache, IsOk());
  const int port = (*cache)->port();
  const int silent = Connect(port);
  const int half = Connect(port);
  ASSERT_GE(silent, 0);
  ASSERT_GE(half, 0);
  (void)::send(half, "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL);
  // A head sent a piece at a time, all within the limit, is served.
  const int slow = Connect(port);
  ASSERT_GE(slow, 0);
  for (absl::string_view piece : {"GET /metr", "ics HTTP/1.1\r\n", "Host: cache\r\n", "\r\n"}) {
    (void)::send(slow, piece.data(), piece.size(), MSG_NOSIGNAL);
    absl::SleepFor(absl::Milliseconds(100));
  }
  char answer[16] = {};
  EXPECT_GT(::recv(slow, answer, sizeof(answer) - 1, 0), 0);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200"));
  const absl::Time start = absl::Now();
  char byte;
  EXPECT_EQ(::recv(silent, &byte, 1, 0), 0);
  EXPECT_LE(::recv(half, &byte, 1, 0), 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  for (int fd : {silent, half, slow}) ::close(fd);
  EXPECT_EQ((*cache)->counters().idle_dropped, 2u);
  (*cache)->Stop();
}

TEST_F(AgentSiteCache, EvictsTheLeastRecentlyServedBlobUnderMaxBytes) {
  const std::string second = ArtifactBytes(3 * 1024 * 1024, 8);
  const std::string second_digest = Sha256Of(second);
  WriteTextFile(work_.Sub("origin/blobs/sha256/" + second_digest), second);
  StartCache({"--max-bytes", absl::StrCat(5 * 1024 * 1024)});
  EXPECT_EQ(Body(Get(cache_->port(), "/blobs/sha256/" + digest_)), blob_);
  EXPECT_EQ(Body(Get(cache_->port(), "/blobs/sha256/" + second_digest)), second);
  EXPECT_FALSE(fs::exists(work_.Sub("store/" + digest_)));
  EXPECT_TRUE(fs::exists(work_.Sub("store/" + second_digest)));
  EXPECT_EQ(Metric("evicted_bytes_total"), absl::StrCat(blob_.size()));
}

}  // namespace
}  // namespace weightpath::agent
