#include "agent/sitecache/site_cache.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/base/log.h"
#include "agent/config/agent_config.h"
#include "agent/fetch/artifact_fetcher.h"
#include "agent/fetch/build_cache.h"
#include "agent/fetch/cache_directory.h"
#include "agent/fetch/sha256_file.h"
#include "agent/fetch/verified_stamp.h"
#include "agent/net/curl_library.h"
#include "common/clock.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

namespace weightpath::agent {
namespace {

constexpr size_t kMaxRequestHeadBytes = 8 * 1024;
// Connections still sending their request head are read by the acceptor,
// without a thread, at most this many; one more closes the oldest. So idle
// or slow clients cost a descriptor and at most their head each (8 MiB in
// all), and cannot take the --max-connections threads from the devices:
// when each connection had its thread from the start, 64 silent sockets
// held all 64 for the 10 s head limit, and every download meanwhile was
// answered 503.
constexpr size_t kMaxWaitingHeads = 1024;
// Connections the kernel queues for the acceptor: a site's devices booting
// at once, while the acceptor is off the CPU, would overflow 128 and each
// lose a second to the SYN retransmission.
constexpr int kListenBacklog = 1024;
// Accepts per turn of the acceptor's loop, so a flood of connections does
// not starve the heads already waiting.
constexpr int kAcceptsPerTurn = 64;
constexpr char kBlobPrefix[] = "/blobs/sha256/";
// sendfile moves at most this much per call, so the deadline is looked at
// between pieces.
constexpr size_t kSendPieceBytes = 1 << 20;

struct CurlDeleter {
  const CurlApi* curl;
  void operator()(CURL* handle) const { curl->easy_cleanup(handle); }
};

// What the length probe saw: the total of a Content-Range, or the
// Content-Length of a 200 (a source that ignores Range), and no body kept.
struct LengthProbe {
  std::optional<uint64_t> total;
  std::optional<uint64_t> content_length;
};

size_t ReadLengthHeader(char* data, size_t size, size_t count, void* user) {
  auto* probe = static_cast<LengthProbe*>(user);
  const absl::string_view line(data, size * count);
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return size * count;
  const absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, colon));
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  uint64_t number = 0;
  if (absl::EqualsIgnoreCase(name, "content-range")) {
    const size_t slash = value.rfind('/');
    if (slash != absl::string_view::npos && absl::SimpleAtoi(value.substr(slash + 1), &number)) {
      probe->total = number;
    }
  } else if (absl::EqualsIgnoreCase(name, "content-length") && absl::SimpleAtoi(value, &number)) {
    probe->content_length = number;
  }
  return size * count;
}

// Takes the one byte asked for; a source that sends the whole body instead
// is cut off after its headers.
size_t DiscardBody(char*, size_t size, size_t count, void*) {
  return size * count <= 1 ? size * count : 0;
}

// The length an upstream announces for a blob: a GET of its first byte
// (Range: bytes=0-0) read from Content-Range, which any Range-capable
// static server answers (HEAD is not always served). What the fetch then
// expects; its digest decides whether the length was true.
absl::StatusOr<uint64_t> UpstreamLength(const std::string& url, absl::Duration timeout) {
  ASSIGN_OR_RETURN(const CurlApi* api, LoadCurl());
  std::unique_ptr<CURL, CurlDeleter> curl(api->easy_init(), CurlDeleter{api});
  if (!curl) return absl::InternalError("curl_easy_init failed");
  CURL* handle = curl.get();
  LengthProbe probe;
  api->easy_setopt(handle, CURLOPT_URL, url.c_str());
  api->easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
  api->easy_setopt(handle, CURLOPT_RANGE, "0-0");
  api->easy_setopt(handle, CURLOPT_FAILONERROR, 1L);
  api->easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(handle, CURLOPT_HEADERFUNCTION, &ReadLengthHeader);
  api->easy_setopt(handle, CURLOPT_HEADERDATA, &probe);
  api->easy_setopt(handle, CURLOPT_WRITEFUNCTION, &DiscardBody);
  api->easy_setopt(handle, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  const CURLcode code = api->easy_perform(handle);
  long status = 0;
  api->easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  if (status == 404 || status == 410) {
    return absl::NotFoundError(absl::StrCat(url, " answered HTTP ", status));
  }
  std::optional<uint64_t> length;
  if (status == 206) length = probe.total;
  if (status == 200) length = probe.content_length;
  if (code != CURLE_OK && code != CURLE_WRITE_ERROR) {
    return absl::UnavailableError(absl::StrCat(url, ": ", api->easy_strerror(code)));
  }
  if (!length.has_value() || *length == 0) {
    return absl::UnavailableError(
        absl::StrCat(url, " answered HTTP ", status, " without the blob's length"));
  }
  return *length;
}

// The blobs in the store, their sizes, when each was last served, and which
// are pinned (being served or fetched): what eviction may take.
class BlobIndex {
 public:
  void Load(const CacheContents& contents) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const CacheBlob& blob : contents.blobs) {
      entries_[blob.sha256] = {blob.size_bytes, absl::ToUnixMicros(blob.last_used), 0};
      total_ += blob.size_bytes;
    }
  }
  // Pins `sha256` if the store holds it (also one another process, such as
  // the device's agent, put there since the scan).
  bool PinIfPresent(const std::string& sha256, const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(sha256);
    if (found == entries_.end()) {
      struct stat info;
      if (::lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return false;
      found = entries_.emplace(sha256, Entry{static_cast<uint64_t>(info.st_size), 0, 0}).first;
      total_ += found->second.size;
    }
    ++found->second.pins;
    found->second.last_used = absl::ToUnixMicros(absl::Now());
    return true;
  }
  void Unpin(const std::string& sha256) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(sha256);
    if (found != entries_.end() && found->second.pins > 0) --found->second.pins;
  }
  void Forget(const std::string& sha256) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(sha256);
    if (found == entries_.end()) return;
    total_ -= std::min(total_, found->second.size);
    entries_.erase(found);
  }
  // Evicts unpinned blobs, least recently served first, until `incoming`
  // more bytes fit under `max_bytes`; false when they cannot.
  bool MakeRoom(uint64_t incoming, uint64_t max_bytes, const std::string& cache_dir,
                std::atomic<uint64_t>* evicted) {
    if (max_bytes == 0) return true;
    if (incoming > max_bytes) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    while (total_ + incoming > max_bytes) {
      auto oldest = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->second.pins == 0 &&
            (oldest == entries_.end() || it->second.last_used < oldest->second.last_used)) {
          oldest = it;
        }
      }
      if (oldest == entries_.end()) return false;
      const std::string path = absl::StrCat(cache_dir, "/", oldest->first);
      ::unlink(StampPathFor(path).c_str());
      ::unlink(path.c_str());
      log::Info("serve-cache: evicted {} ({} bytes)", path, oldest->second.size);
      *evicted += oldest->second.size;
      total_ -= std::min(total_, oldest->second.size);
      entries_.erase(oldest);
    }
    return true;
  }

 private:
  struct Entry {
    uint64_t size = 0;
    int64_t last_used = 0;
    int pins = 0;
  };
  std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  uint64_t total_ = 0;
};

// One upstream fetch that every request for the same blob waits on.
struct Inflight {
  bool done = false;
  absl::Status status;
};

struct Request {
  std::string method;
  std::string target;
  std::string range;  // the Range header's value, if any
};

// The request line and the Range header of a head that ends in a blank
// line (the blank line and anything after it ignored).
absl::StatusOr<Request> ParseRequestHead(std::string head) {
  head.resize(head.find("\r\n\r\n"));
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
    return absl::InvalidArgumentError("malformed request line");
  }
  Request request{std::string(parts[0]), std::string(parts[1]), ""};
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(lines[i].substr(0, colon)), "range")) {
      request.range = std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
  }
  return request;
}

// The 64 hex digits of a /blobs/sha256/<hex> target, exactly that form.
std::optional<std::string> BlobDigestOf(const std::string& target) {
  absl::string_view rest = target;
  if (!absl::ConsumePrefix(&rest, kBlobPrefix)) return std::nullopt;
  const std::string digest(rest);
  if (!IsSha256Hex(digest)) return std::nullopt;
  return digest;
}

// One byte range of a file of `size` bytes, from a Range header value:
// bytes=A-B, bytes=A- or bytes=-N. nullopt: serve the whole file (no
// header, or a form this server does not take, such as several ranges);
// an empty range: 416.
struct ByteRange {
  uint64_t first = 0;
  uint64_t length = 0;
  bool partial = false;
  bool unsatisfiable = false;
};

ByteRange ParseRange(const std::string& header, uint64_t size) {
  ByteRange whole{0, size, false, false};
  absl::string_view spec = header;
  if (spec.empty() || !absl::ConsumePrefix(&spec, "bytes=") || absl::StrContains(spec, ',')) {
    return whole;
  }
  const size_t dash = spec.find('-');
  if (dash == absl::string_view::npos) return whole;
  const absl::string_view from = spec.substr(0, dash);
  const absl::string_view to = spec.substr(dash + 1);
  uint64_t a = 0, b = 0;
  // Digits only, and at most 19 of them: no sign, no overflow.
  auto digits = [](absl::string_view text, uint64_t* value) {
    return !text.empty() && text.size() <= 19 &&
           std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
           absl::SimpleAtoi(text, value);
  };
  if (from.empty()) {
    if (!digits(to, &b)) return whole;
    if (b == 0 || size == 0) return {0, 0, true, true};
    b = std::min(b, size);
    return {size - b, b, true, false};
  }
  if (!digits(from, &a)) return whole;
  if (a >= size) return {0, 0, true, true};
  uint64_t last = size - 1;
  if (!to.empty()) {
    if (!digits(to, &b) || b < a) return whole;
    last = std::min(last, b);
  }
  return {a, last - a + 1, true, false};
}

// Writes all of `text` within `deadline`.
bool SendAll(int fd, absl::string_view text, absl::Time deadline) {
  while (!text.empty()) {
    if (absl::Now() >= deadline) return false;
    const ssize_t put = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (put < 0) {
      if (errno == EINTR) continue;
      return false;  // EAGAIN: SO_SNDTIMEO passed without progress
    }
    text.remove_prefix(static_cast<size_t>(put));
  }
  return true;
}

void SendStatus(int fd, int status, absl::string_view reason, absl::Time deadline,
                absl::string_view extra_headers = "") {
  const std::string body = absl::StrCat(status, " ", reason, "\n");
  SendAll(fd,
          absl::StrCat("HTTP/1.1 ", status, " ", reason,
                       "\r\nContent-Type: text/plain\r\nContent-Length: ", body.size(),
                       "\r\nConnection: close\r\n", extra_headers, "\r\n", body),
          deadline);
}

// A connection the acceptor reads the request head of.
struct WaitingHead {
  UniqueFd fd;
  absl::Time accepted;
  std::string head;
};

class LocalSiteCache : public SiteCache {
 public:
  explicit LocalSiteCache(SiteCacheOptions options)
      : options_(std::move(options)),
        fetcher_(options_.cache_dir, SystemClockInstance(), kDefaultReverifyAfter) {}
  ~LocalSiteCache() override { Stop(); }

  absl::Status Start();
  int port() const override { return port_; }
  SiteCacheCounters counters() const override;
  void Stop() override;

 private:
  void AcceptLoop();
  // Reads what `waiting` sent; true while it is still sending its head. A
  // whole head goes to Dispatch.
  bool ReadHead(WaitingHead& waiting);
  // Answers a head that cannot be served (400, 431, 503 over
  // --max-connections) at once, or starts a thread that serves it.
  void Dispatch(WaitingHead waiting);
  void Serve(UniqueFd client, const Request& request, absl::Time accepted);
  void ServeBlob(int fd, const Request& request, const std::string& sha256, absl::Time deadline);
  void ServeMetrics(int fd, absl::Time deadline);
  // The blob in the store, fetched from an upstream when missing, one fetch
  // for all who ask at once. NOT_FOUND: no upstream has it.
  absl::Status Ensure(const std::string& sha256, absl::Time deadline);
  absl::Status FetchFromUpstreams(const std::string& sha256);
  std::string BlobPath(const std::string& sha256) const {
    return absl::StrCat(options_.cache_dir, "/", sha256);
  }

  SiteCacheOptions options_;
  ArtifactFetcher fetcher_;
  BlobIndex index_;
  UniqueFd listener_;
  UniqueFd wake_;  // an eventfd that Stop writes
  int port_ = 0;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};

  std::mutex connections_mutex_;
  std::condition_variable connections_done_;
  int connections_ = 0;

  std::mutex inflight_mutex_;
  std::condition_variable inflight_done_;
  std::map<std::string, std::shared_ptr<Inflight>> inflight_;

  std::atomic<uint64_t> hits_{0}, misses_{0}, bytes_served_{0}, bytes_from_upstream_{0},
      refused_digests_{0}, upstream_failures_{0}, not_found_{0}, refused_connections_{0},
      idle_dropped_{0}, evicted_bytes_{0};
};

absl::Status LocalSiteCache::Start() {
  if (options_.cache_dir.empty()) return absl::InvalidArgumentError("--cache-dir: required");
  if (options_.upstreams.empty()) {
    return absl::InvalidArgumentError("--upstream: at least one is required");
  }
  if (options_.max_connections < 1 || options_.max_connections > 4096) {
    return absl::InvalidArgumentError("--max-connections: must be 1 to 4096");
  }
  std::error_code made;
  std::filesystem::create_directories(options_.cache_dir, made);
  ASSIGN_OR_RETURN(const CacheContents contents, ScanCache(options_.cache_dir));
  index_.Load(contents);

  const size_t colon = options_.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(options_.listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen: '", ControlEscaped(options_.listen), "' is not host:port"));
  }
  std::string host = options_.listen.substr(0, colon);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) host = host.substr(1, host.size() - 2);
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  struct addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen: cannot resolve '", ControlEscaped(host), "'"));
  }
  listener_.reset(::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int yes = 1;
  ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  const bool bound = listener_.valid() &&
                     ::bind(listener_.get(), found->ai_addr, found->ai_addrlen) == 0 &&
                     ::listen(listener_.get(), kListenBacklog) == 0;
  ::freeaddrinfo(found);
  if (!bound) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ",
                                               ControlEscaped(options_.listen), ": ",
                                               std::strerror(errno)));
  }
  struct sockaddr_storage address;
  socklen_t length = sizeof(address);
  ::getsockname(listener_.get(), reinterpret_cast<struct sockaddr*>(&address), &length);
  port_ = ntohs(address.ss_family == AF_INET6
                    ? reinterpret_cast<struct sockaddr_in6*>(&address)->sin6_port
                    : reinterpret_cast<struct sockaddr_in*>(&address)->sin_port);
  wake_.reset(::eventfd(0, EFD_CLOEXEC));
  // curl_global_init once, before any request thread may fetch.
  (void)LoadCurl();
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void LocalSiteCache::Stop() {
  if (stopping_.exchange(true)) return;
  const uint64_t one = 1;
  if (wake_.valid()) (void)::write(wake_.get(), &one, sizeof(one));
  if (acceptor_.joinable()) acceptor_.join();
  std::unique_lock<std::mutex> lock(connections_mutex_);
  connections_done_.wait(lock, [this] { return connections_ == 0; });
}

SiteCacheCounters LocalSiteCache::counters() const {
  SiteCacheCounters out;
  out.hits = hits_;
  out.misses = misses_;
  out.bytes_served = bytes_served_;
  out.bytes_from_upstream = bytes_from_upstream_;
  out.refused_digests = refused_digests_;
  out.upstream_failures = upstream_failures_;
  out.not_found = not_found_;
  out.refused_connections = refused_connections_;
  out.idle_dropped = idle_dropped_;
  out.evicted_bytes = evicted_bytes_;
  return out;
}

void LocalSiteCache::AcceptLoop() {
  // Oldest first: all share one head limit, so the front's deadline is the
  // nearest.
  std::deque<WaitingHead> waiting;
  std::vector<struct pollfd> fds;
  absl::Time accept_paused_until = absl::InfinitePast();
  while (!stopping_) {
    absl::Time now = absl::Now();
    fds.clear();
    // Out of descriptors, the listener rests a moment rather than waking
    // the loop at once again.
    fds.push_back({now < accept_paused_until ? -1 : listener_.get(), POLLIN, 0});
    fds.push_back({wake_.get(), POLLIN, 0});
    for (const WaitingHead& head : waiting) fds.push_back({head.fd.get(), POLLIN, 0});
    absl::Duration wait = absl::Seconds(1);
    if (!waiting.empty()) {
      wait = std::min(wait, waiting.front().accepted + options_.header_timeout - now);
    }
    if (now < accept_paused_until) wait = std::min(wait, accept_paused_until - now);
    const int wait_ms = static_cast<int>(
        std::max<int64_t>(0, absl::ToInt64Milliseconds(wait + absl::Milliseconds(1))));
    if (::poll(fds.data(), fds.size(), wait_ms) < 0) continue;
    if (fds[1].revents != 0) break;
    now = absl::Now();
    // Kept in place, in order (a move closes the descriptor of one that
    // goes): no new container each turn.
    size_t kept = 0;
    for (size_t i = 0; i < waiting.size(); ++i) {
      WaitingHead& head = waiting[i];
      if (fds[i + 2].revents != 0 && !ReadHead(head)) continue;
      if (now >= head.accepted + options_.header_timeout) {
        ++idle_dropped_;
        continue;
      }
      if (kept != i) waiting[kept] = std::move(head);
      ++kept;
    }
    waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(kept), waiting.end());
    if (fds[0].revents == 0) continue;
    for (int accepted = 0; accepted < kAcceptsPerTurn; ++accepted) {
      UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!client.valid()) {
        if (errno == EMFILE || errno == ENFILE) {
          if (waiting.empty()) {
            accept_paused_until = now + absl::Milliseconds(100);
            break;
          }
          waiting.pop_front();
          ++idle_dropped_;
          continue;
        }
        break;  // EAGAIN: none left; or the client went before it was taken
      }
      if (waiting.size() >= kMaxWaitingHeads) {
        waiting.pop_front();
        ++idle_dropped_;
      }
      waiting.push_back(WaitingHead{std::move(client), now, ""});
    }
  }
}

bool LocalSiteCache::ReadHead(WaitingHead& waiting) {
  char buffer[2048];
  const ssize_t got = ::recv(waiting.fd.get(), buffer, sizeof(buffer), 0);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
  if (got <= 0) return false;  // the client closed, or reset
  // The blank line may straddle two reads.
  const size_t search_from = waiting.head.size() < 3 ? 0 : waiting.head.size() - 3;
  waiting.head.append(buffer, static_cast<size_t>(got));
  const size_t end = waiting.head.find("\r\n\r\n", search_from);
  if (end == std::string::npos || end + 4 > kMaxRequestHeadBytes) {
    if (waiting.head.size() <= kMaxRequestHeadBytes) return true;
    // Sent on the non-blocking socket: what does not fit at once is lost,
    // and the acceptor never waits on a client.
    SendStatus(waiting.fd.get(), 431, "Request Header Fields Too Large", absl::InfiniteFuture());
    return false;
  }
  Dispatch(std::move(waiting));
  return false;
}

void LocalSiteCache::Dispatch(WaitingHead waiting) {
  const int fd = waiting.fd.get();
  absl::StatusOr<Request> request = ParseRequestHead(std::move(waiting.head));
  if (!request.ok()) {
    SendStatus(fd, 400, "Bad Request", absl::InfiniteFuture());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(connections_mutex_);
    if (connections_ >= options_.max_connections) {
      ++refused_connections_;
      SendStatus(fd, 503, "Service Unavailable", absl::InfiniteFuture());
      return;
    }
    ++connections_;
  }
  // The thread serves with blocking sends, bounded by SO_SNDTIMEO.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::thread([this, fd = waiting.fd.release(), parsed = *std::move(request),
               accepted = waiting.accepted] { Serve(UniqueFd(fd), parsed, accepted); })
      .detach();
}

void LocalSiteCache::Serve(UniqueFd client, const Request& request, absl::Time accepted) {
  // sendfile takes no MSG_NOSIGNAL: a client gone mid-body raises SIGPIPE,
  // whose default ends the process (one aborted download stopped the whole
  // cache). Blocked in this thread, it stays pending and sendfile fails
  // with EPIPE instead.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  const int fd = client.get();
  // A client that takes no bytes for this long is dropped: sends fail with
  // EAGAIN instead of holding the thread.
  struct timeval stall;
  stall.tv_sec = std::max<int64_t>(1, absl::ToInt64Seconds(options_.send_stall_timeout));
  stall.tv_usec = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof(stall));
  const absl::Time deadline = accepted + options_.request_timeout;
  const std::optional<std::string> digest = BlobDigestOf(request.target);
  const bool get_or_head = request.method == "GET" || request.method == "HEAD";
  if (request.method == "GET" && request.target == "/metrics") {
    ServeMetrics(fd, deadline);
  } else if (!digest.has_value()) {
    ++not_found_;
    SendStatus(fd, 404, "Not Found", deadline);
  } else if (!get_or_head) {
    SendStatus(fd, 405, "Method Not Allowed", deadline, "Allow: GET, HEAD\r\n");
  } else {
    ServeBlob(fd, request, *digest, deadline);
  }
  client.reset();
  std::lock_guard<std::mutex> lock(connections_mutex_);
  --connections_;
  connections_done_.notify_all();
}

void LocalSiteCache::ServeMetrics(int fd, absl::Time deadline) {
  const SiteCacheCounters c = counters();
  std::string body;
  auto counter = [&body](absl::string_view name, absl::string_view help, uint64_t value) {
    absl::StrAppend(&body, "# HELP weightpath_site_cache_", name, " ", help,
                    "\n# TYPE weightpath_site_cache_", name, " counter\nweightpath_site_cache_",
                    name, " ", value, "\n");
  };
  counter("hits_total", "Blob requests answered from the store.", c.hits);
  counter("misses_total", "Blob requests that needed an upstream fetch.", c.misses);
  counter("served_bytes_total", "Body bytes sent to clients.", c.bytes_served);
  counter("upstream_bytes_total", "Bytes received from upstreams.", c.bytes_from_upstream);
  counter("refused_digests_total", "Upstream blobs whose SHA-256 did not match (discarded).",
          c.refused_digests);
  counter("upstream_failures_total", "Upstream fetches that failed otherwise.",
          c.upstream_failures);
  counter("not_found_total", "Requests outside /blobs/sha256/<hex>, or for blobs no upstream has.",
          c.not_found);
  counter("refused_connections_total", "Requests over --max-connections being served (503).",
          c.refused_connections);
  counter("idle_dropped_total",
          "Connections closed before a whole request head: past the head limit, or the "
          "oldest when too many were waiting.",
          c.idle_dropped);
  counter("evicted_bytes_total", "Bytes evicted under --max-bytes.", c.evicted_bytes);
  SendAll(fd,
          absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                       "Content-Length: ",
                       body.size(), "\r\nConnection: close\r\n\r\n", body),
          deadline);
}

void LocalSiteCache::ServeBlob(int fd, const Request& request, const std::string& sha256,
                               absl::Time deadline) {
  const std::string path = BlobPath(sha256);
  if (!index_.PinIfPresent(sha256, path)) {
    ++misses_;
    const absl::Status fetched = Ensure(sha256, deadline);
    if (!fetched.ok()) {
      if (absl::IsNotFound(fetched)) {
        ++not_found_;
        SendStatus(fd, 404, "Not Found", deadline);
      } else {
        SendStatus(fd, 502, "Bad Gateway", deadline);
      }
      return;
    }
    if (!index_.PinIfPresent(sha256, path)) {
      SendStatus(fd, 503, "Service Unavailable", deadline);
      return;
    }
  } else {
    ++hits_;
  }
  struct Unpin {
    BlobIndex& index;
    const std::string& sha256;
    ~Unpin() { index.Unpin(sha256); }
  } unpin{index_, sha256};
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat info;
  if (!file.valid() || ::fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    SendStatus(fd, 503, "Service Unavailable", deadline);
    return;
  }
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  const ByteRange range = ParseRange(request.range, size);
  if (range.unsatisfiable) {
    SendStatus(fd, 416, "Range Not Satisfiable", deadline,
               absl::StrCat("Content-Range: bytes */", size, "\r\n"));
    return;
  }
  std::string head = absl::StrCat(
      "HTTP/1.1 ", range.partial ? "206 Partial Content" : "200 OK",
      "\r\nContent-Type: application/octet-stream\r\nAccept-Ranges: bytes\r\nContent-Length: ",
      range.length, "\r\nConnection: close\r\n");
  if (range.partial) {
    absl::StrAppend(&head, "Content-Range: bytes ", range.first, "-",
                    range.first + range.length - 1, "/", size, "\r\n");
  }
  absl::StrAppend(&head, "\r\n");
  if (!SendAll(fd, head, deadline) || request.method == "HEAD") return;
  off_t offset = static_cast<off_t>(range.first);
  uint64_t left = range.length;
  while (left > 0 && absl::Now() < deadline && !stopping_) {
    const ssize_t put =
        ::sendfile(fd, file.get(), &offset, std::min<uint64_t>(left, kSendPieceBytes));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) break;  // the client went, or took nothing for send_stall_timeout
    left -= static_cast<uint64_t>(put);
    bytes_served_ += static_cast<uint64_t>(put);
  }
}

absl::Status LocalSiteCache::Ensure(const std::string& sha256, absl::Time deadline) {
  std::shared_ptr<Inflight> flight;
  bool mine = false;
  {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    auto found = inflight_.find(sha256);
    if (found == inflight_.end()) {
      flight = std::make_shared<Inflight>();
      inflight_.emplace(sha256, flight);
      mine = true;
    } else {
      flight = found->second;
    }
  }
  if (mine) {
    const absl::Status status = FetchFromUpstreams(sha256);
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    flight->status = status;
    flight->done = true;
    inflight_.erase(sha256);
    inflight_done_.notify_all();
    return status;
  }
  std::unique_lock<std::mutex> lock(inflight_mutex_);
  while (!flight->done) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("fetch still running");
    inflight_done_.wait_for(lock, absl::ToChronoMilliseconds(std::min(left, absl::Seconds(1))));
  }
  return flight->status;
}

absl::Status LocalSiteCache::FetchFromUpstreams(const std::string& sha256) {
  absl::Status last = absl::NotFoundError("no upstream has it");
  bool all_not_found = true;
  FetchOptions fetch_options;
  fetch_options.stall_timeout = options_.upstream_stall_timeout;
  fetch_options.stall_min_rate = kMirrorMinRate;
  fetch_options.untrusted_source = true;
  for (const std::string& upstream : options_.upstreams) {
    const std::string url = absl::StrCat(upstream, kBlobPrefix, sha256);
    absl::StatusOr<uint64_t> length = UpstreamLength(url, options_.upstream_stall_timeout);
    if (!length.ok()) {
      if (!absl::IsNotFound(length.status())) {
        all_not_found = false;
        ++upstream_failures_;
        log::Warn("serve-cache: upstream {}: {}", ControlEscaped(url), length.status().ToString());
      }
      last = length.status();
      continue;
    }
    if (!index_.MakeRoom(*length, options_.max_bytes, options_.cache_dir, &evicted_bytes_)) {
      all_not_found = false;
      last = absl::ResourceExhaustedError(absl::StrCat(
          "blob ", sha256, " (", *length, " bytes) does not fit --max-bytes ", options_.max_bytes,
          " beside the blobs being served"));
      log::Warn("serve-cache: {}", last.ToString());
      break;
    }
    v1::Artifact blob;
    blob.set_uri(url);
    blob.set_sha256(sha256);
    blob.set_size_bytes(*length);
    absl::StatusOr<FetchResult> fetched =
        fetcher_.Fetch(blob, options_.request_timeout, fetch_options);
    if (fetched.ok()) {
      bytes_from_upstream_ += fetched->bytes_transferred;
      log::Info("serve-cache: fetched {} ({} bytes) from {}", sha256, *length,
                ControlEscaped(upstream));
      return absl::OkStatus();
    }
    all_not_found &= absl::IsNotFound(fetched.status());
    if (absl::IsDataLoss(fetched.status())) {
      ++refused_digests_;
    } else if (!absl::IsNotFound(fetched.status())) {
      ++upstream_failures_;
    }
    index_.Forget(sha256);
    log::Warn("serve-cache: upstream {}: {}", ControlEscaped(url), fetched.status().ToString());
    last = fetched.status();
  }
  if (all_not_found) return absl::NotFoundError(last.message());
  return absl::UnavailableError(last.message());
}

}  // namespace

absl::StatusOr<std::unique_ptr<SiteCache>> StartSiteCache(SiteCacheOptions options) {
  for (std::string& upstream : options.upstreams) {
    absl::StatusOr<std::string> base = ValidateBlobBaseUrl(upstream);
    if (!base.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--upstream: ", base.status().message()));
    }
    upstream = *std::move(base);
  }
  auto cache = std::make_unique<LocalSiteCache>(std::move(options));
  RETURN_IF_ERROR(cache->Start());
  return cache;
}

}  // namespace weightpath::agent
