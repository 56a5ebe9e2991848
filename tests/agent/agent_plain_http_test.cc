// The metadata fetcher's plain-socket HTTP/1.1 client (agent/net/plain_http.h)
// against a scripted loopback peer that answers each request with bytes
// written here, so framings and faults a well-behaved server never sends
// (chunked bodies, oversized headers, lying lengths, closed keep-alive
// connections, redirects) are exercised byte for byte.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/signed/metadata_fetcher.h"
#include "agent/net/plain_http.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using weightpath::testing::IsOkAndHolds;
using weightpath::testing::StatusIs;

// One scripted answer: the bytes sent after a request arrives, and whether
// the peer then closes the connection.
struct Answer {
  std::string bytes;
  bool close_after = false;
};

// Accepts connections on 127.0.0.1 and answers the Nth request it reads
// (over any connection) with answers[N]; records each request's first line.
class ScriptedPeer {
 public:
  explicit ScriptedPeer(std::vector<Answer> answers) : answers_(std::move(answers)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(listener_, 8);
    socklen_t length = sizeof(address);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedPeer() {
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }

  std::string Url(const std::string& path) const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  int connections() const { return connections_; }

 private:
  void Serve() {
    while (!stopping_) {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      ++connections_;
      std::string pending;
      bool open = true;
      while (open) {
        size_t end;
        while ((end = pending.find("\r\n\r\n")) == std::string::npos) {
          char buffer[4096];
          const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
          if (n <= 0) {
            open = false;
            break;
          }
          pending.append(buffer, static_cast<size_t>(n));
        }
        if (!open) break;
        size_t index;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          requests_.push_back(pending.substr(0, pending.find("\r\n")));
          index = requests_.size() - 1;
        }
        pending.erase(0, end + 4);
        if (index >= answers_.size()) break;
        const Answer& answer = answers_[index];
        ::send(fd, answer.bytes.data(), answer.bytes.size(), MSG_NOSIGNAL);
        if (answer.close_after) open = false;
      }
      ::close(fd);
    }
  }

  std::vector<Answer> answers_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::mutex mutex_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

HttpMetadataFetcher FetcherFor(const ScriptedPeer& peer, Clock* clock,
                               absl::Duration call_timeout = absl::Seconds(5)) {
  return HttpMetadataFetcher(peer.Url("/metadata/"), clock,
                             clock->MonotonicNow() + absl::Seconds(20), call_timeout);
}

TEST(AgentPlainHttp, ChunkedAndSizedBodiesOverOneKeptConnection) {
  ScriptedPeer peer({
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
       "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"},
      {"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"},
      {"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc"},
  });
  SystemClock clock;
  HttpMetadataFetcher fetcher = FetcherFor(peer, &clock);
  EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
              IsOkAndHolds(std::string("hello, world")));
  EXPECT_THAT(fetcher.Fetch({"root", "2.root.json", 512000}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("answered HTTP 404")));
  EXPECT_THAT(fetcher.Fetch({"snapshot", "snapshot.json", 16384}),
              IsOkAndHolds(std::string("abc")));
  EXPECT_EQ(peer.connections(), 1);
  EXPECT_THAT(peer.requests(),
              ::testing::ElementsAre("GET /metadata/timestamp.json HTTP/1.1",
                                     "GET /metadata/2.root.json HTTP/1.1",
                                     "GET /metadata/snapshot.json HTTP/1.1"));
}

TEST(AgentPlainHttp, BodiesPastTheLimitAreRefusedWhateverTheFraming) {
  SystemClock clock;
  {
    // The announced length alone refuses it: the body never comes.
    ScriptedPeer peer({{"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n"}});
    HttpMetadataFetcher fetcher = FetcherFor(peer, &clock, absl::Seconds(30));
    const absl::Time start = absl::Now();
    EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
                StatusIs(absl::StatusCode::kResourceExhausted,
                         AllOf(HasSubstr("more than the 16384 bytes"), HasSubstr("endless data"))));
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }
  {
    ScriptedPeer peer({{absl::StrCat("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                                     "4000\r\n", std::string(0x4000, 'x'), "\r\n1\r\ny\r\n0\r\n\r\n")}});
    HttpMetadataFetcher fetcher = FetcherFor(peer, &clock);
    EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
                StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("endless data")));
  }
  {
    // No length at all: delimited by the end of the connection.
    ScriptedPeer peer({{absl::StrCat("HTTP/1.0 200 OK\r\n\r\n", std::string(20000, 'z')), true},
                       {"HTTP/1.0 200 OK\r\n\r\nshort", true}});
    HttpMetadataFetcher fetcher = FetcherFor(peer, &clock);
    EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
                StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("endless data")));
    EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
                IsOkAndHolds(std::string("short")));
  }
}

TEST(AgentPlainHttp, MalformedAnswersAreRefusedNamingWhatWasWrong) {
  const struct {
    std::string answer;
    std::string complaint;
  } cases[] = {
      {"HTTP/2 200 OK\r\n\r\n", "not an HTTP/1.x status line"},
      {"HTTP/1.1 2000 OK\r\n\r\n", "not an HTTP/1.x status line"},
      {absl::StrCat("HTTP/1.1 200 OK\r\nX: ", std::string(70000, 'h'), "\r\n\r\n"),
       "response headers longer than 65536 bytes"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
       "conflicting Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad or conflicting Content-Length"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "connection closed while reading"},
      {"", "connection closed before any response"},
  };
  SystemClock clock;
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.complaint);
    ScriptedPeer peer({{bad.answer, true}});
    HttpMetadataFetcher fetcher = FetcherFor(peer, &clock);
    EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
                StatusIs(absl::StatusCode::kUnavailable,
                         AllOf(HasSubstr("/metadata/timestamp.json"), HasSubstr(bad.complaint))));
  }
}

TEST(AgentPlainHttp, RedirectsAreFollowedFiveAtMost) {
  SystemClock clock;
  {
    ScriptedPeer peer({
        {"HTTP/1.1 302 Found\r\nLocation: /mirror/timestamp.json\r\nContent-Length: 0\r\n\r\n"},
        {"HTTP/1.1 301 Moved\r\nLocation: v2/timestamp.json\r\nContent-Length: 0\r\n\r\n"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"},
    });
    HttpMetadataFetcher fetcher = FetcherFor(peer, &clock);
    EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
                IsOkAndHolds(std::string("{}")));
    EXPECT_THAT(peer.requests(), ::testing::ElementsAre("GET /metadata/timestamp.json HTTP/1.1",
                                                        "GET /mirror/timestamp.json HTTP/1.1",
                                                        "GET /mirror/v2/timestamp.json HTTP/1.1"));
  }
  {
    std::vector<Answer> loop(7, {"HTTP/1.1 307 Again\r\nLocation: /loop\r\nContent-Length: 0\r\n\r\n"});
    ScriptedPeer peer(loop);
    HttpMetadataFetcher fetcher = FetcherFor(peer, &clock);
    EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("more than 5 redirects")));
  }
  {
    ScriptedPeer peer({{"HTTP/1.1 302 Found\r\nLocation: ftp://elsewhere/t\r\n\r\n", true}});
    HttpMetadataFetcher fetcher = FetcherFor(peer, &clock);
    EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not http:// or https://")));
  }
}

TEST(AgentPlainHttp, AKeptConnectionTheServerClosedIsOpenedAgainOnce) {
  ScriptedPeer peer({
      // Claims keep-alive, then closes anyway (an idle timeout on the server).
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na", true},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb"},
  });
  SystemClock clock;
  HttpMetadataFetcher fetcher = FetcherFor(peer, &clock);
  EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}), IsOkAndHolds(std::string("a")));
  EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}), IsOkAndHolds(std::string("b")));
  EXPECT_EQ(peer.connections(), 2);
}

TEST(AgentPlainHttp, ATricklingPeerIsCutOffAtTheCallTimeout) {
  // Headers promise a body that never comes.
  ScriptedPeer peer({{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"}});
  SystemClock clock;
  HttpMetadataFetcher fetcher = FetcherFor(peer, &clock, absl::Milliseconds(300));
  const absl::Time start = absl::Now();
  EXPECT_THAT(fetcher.Fetch({"timestamp", "timestamp.json", 16384}),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("no complete answer within 300ms"),
                             HasSubstr("reading the body"))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(AgentPlainHttp, ParsesOnlyPlainHttpUrls) {
  absl::StatusOr<PlainHttpUrl> v6 = ParsePlainHttpUrl("http://[::1]:8080/m/t.json?x=1");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8080);
  EXPECT_EQ(v6->target, "/m/t.json?x=1");
  EXPECT_EQ(v6->host_header, "[::1]:8080");
  absl::StatusOr<PlainHttpUrl> bare = ParsePlainHttpUrl("http://mirror.local");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->port, 80);
  EXPECT_EQ(bare->target, "/");
  EXPECT_FALSE(ParsePlainHttpUrl("https://mirror/").ok());
  EXPECT_FALSE(ParsePlainHttpUrl("http://user:pw@mirror/").ok());
  EXPECT_FALSE(ParsePlainHttpUrl("http://mirror:99999/").ok());
  EXPECT_FALSE(ParsePlainHttpUrl("http://:80/").ok());
}

}  // namespace
}  // namespace weightpath::agent
