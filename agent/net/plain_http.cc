#include "agent/net/plain_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/control_characters.h"
#include "common/status_macros.h"

namespace weightpath::agent {
namespace {

constexpr size_t kReadChunkBytes = 16 * 1024;
constexpr size_t kMaxChunkLineBytes = 1024;
// Error bodies are read only to keep the connection; a longer one closes it.
constexpr int64_t kMaxErrorBodyBytes = 64 * 1024;
constexpr int kMaxInformationalResponses = 4;

// Milliseconds left until `deadline` for poll(), at least 1 while any is
// left, so a sub-millisecond remainder still waits instead of spinning.
int PollTimeoutMs(Clock* clock, MonotonicTime deadline) {
  const absl::Duration left = deadline - clock->MonotonicNow();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(left), 1, 1 << 30));
}

absl::Status TimedOut(absl::string_view step) {
  return absl::DeadlineExceededError(absl::StrCat("timed out while ", step));
}

absl::Status SystemError(absl::string_view step, int error) {
  return absl::UnavailableError(absl::StrCat(step, ": ", std::strerror(error)));
}

// Waits for `events` on `fd` until the deadline; false when it passed.
absl::StatusOr<bool> WaitFor(int fd, short events, Clock* clock, MonotonicTime deadline) {
  for (;;) {
    const int timeout_ms = PollTimeoutMs(clock, deadline);
    if (timeout_ms == 0) return false;
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, timeout_ms);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return SystemError("poll", errno);
  }
}

// The addresses of `host`. A numeric address needs no lookup; a name is
// looked up on a thread, so a resolver that does not answer cannot hold the
// caller past the deadline (the thread is left to finish on its own).
absl::StatusOr<std::vector<sockaddr_storage>> Resolve(const std::string& host, int port,
                                                      Clock* clock, MonotonicTime deadline) {
  sockaddr_storage address{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    return std::vector<sockaddr_storage>{address};
  }
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    return std::vector<sockaddr_storage>{address};
  }
  struct Lookup {
    std::mutex mutex;
    std::condition_variable done;
    bool finished = false;
    int error = 0;
    std::vector<sockaddr_storage> addresses;
  };
  auto lookup = std::make_shared<Lookup>();
  std::thread([lookup, host, port] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int error = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    std::vector<sockaddr_storage> addresses;
    for (addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
      if (entry->ai_addrlen > sizeof(sockaddr_storage)) continue;
      sockaddr_storage copy{};
      std::memcpy(&copy, entry->ai_addr, entry->ai_addrlen);
      addresses.push_back(copy);
    }
    if (found != nullptr) ::freeaddrinfo(found);
    std::lock_guard<std::mutex> lock(lookup->mutex);
    lookup->error = error;
    lookup->addresses = std::move(addresses);
    lookup->finished = true;
    lookup->done.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(lookup->mutex);
  while (!lookup->finished) {
    const int timeout_ms = PollTimeoutMs(clock, deadline);
    if (timeout_ms == 0) return TimedOut(absl::StrCat("looking up ", host));
    lookup->done.wait_for(lock, std::chrono::milliseconds(timeout_ms));
  }
  if (lookup->error != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot look up ", host, ": ", ::gai_strerror(lookup->error)));
  }
  if (lookup->addresses.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot look up ", host, ": no address"));
  }
  return lookup->addresses;
}

socklen_t AddressLength(const sockaddr_storage& address) {
  return address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

// A response's framing, from its headers.
struct Head {
  int status = 0;
  bool http11 = false;
  bool connection_close = false;
  bool chunked = false;
  std::optional<int64_t> content_length;
  std::optional<std::string> location;
};

bool HasToken(absl::string_view list, absl::string_view token) {
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(item), token)) return true;
  }
  return false;
}

absl::StatusOr<Head> ParseHead(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, "\r\n");
  Head head;
  const absl::string_view status_line = lines[0];
  // "HTTP/1.x NNN reason"
  if (status_line.size() < 12 || !absl::StartsWith(status_line, "HTTP/1.") ||
      (status_line[7] != '0' && status_line[7] != '1') || status_line[8] != ' ' ||
      (status_line.size() > 12 && status_line[12] != ' ') ||
      !absl::SimpleAtoi(status_line.substr(9, 3), &head.status) || head.status < 100 ||
      head.status > 599) {
    return absl::UnavailableError(absl::StrCat(
        "not an HTTP/1.x status line: \"", ControlEscaped(status_line.substr(0, 64)), "\""));
  }
  head.http11 = status_line[7] == '1';
  for (size_t i = 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    if (line.empty()) continue;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos || colon == 0 || line[0] == ' ' || line[0] == '\t') {
      // Obsolete line folding included: nothing the agent needs uses it.
      return absl::UnavailableError(
          absl::StrCat("malformed header line \"", ControlEscaped(line.substr(0, 64)), "\""));
    }
    const absl::string_view name = line.substr(0, colon);
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "content-length")) {
      int64_t length = 0;
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), absl::ascii_isdigit) ||
          !absl::SimpleAtoi(value, &length) ||
          (head.content_length && *head.content_length != length)) {
        return absl::UnavailableError(
            absl::StrCat("bad or conflicting Content-Length \"", ControlEscaped(value), "\""));
      }
      head.content_length = length;
    } else if (absl::EqualsIgnoreCase(name, "transfer-encoding")) {
      // Only chunked is understood; no Accept-Encoding is sent, so nothing
      // else (gzip, ...) may come.
      if (!absl::EqualsIgnoreCase(value, "chunked")) {
        return absl::UnavailableError(
            absl::StrCat("unsupported Transfer-Encoding \"", ControlEscaped(value), "\""));
      }
      head.chunked = true;
    } else if (absl::EqualsIgnoreCase(name, "connection")) {
      if (HasToken(value, "close")) head.connection_close = true;
    } else if (absl::EqualsIgnoreCase(name, "location")) {
      head.location = std::string(value);
    }
  }
  // A message with both is ambiguous (request smuggling's favourite); the
  // chunked framing wins, as RFC 9112 says, and the connection is not reused.
  if (head.chunked && head.content_length) {
    head.content_length.reset();
    head.connection_close = true;
  }
  return head;
}

}  // namespace

absl::StatusOr<PlainHttpUrl> ParsePlainHttpUrl(absl::string_view url) {
  constexpr absl::string_view kScheme = "http://";
  if (!absl::StartsWithIgnoreCase(url, kScheme)) {
    return absl::InvalidArgumentError("not an http:// URL");
  }
  absl::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const absl::string_view authority = rest.substr(0, slash);
  PlainHttpUrl parsed;
  parsed.target = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (authority.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError("URL carries user information");
  }
  absl::string_view host = authority;
  absl::string_view port;
  if (absl::StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("unclosed [ in host");
    host = authority.substr(1, close - 1);
    const absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return absl::InvalidArgumentError("junk after ] in host");
      port = after.substr(1);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return absl::InvalidArgumentError("URL names no host");
  for (char c : host) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return absl::InvalidArgumentError("host holds spaces or control characters");
    }
  }
  if (!port.empty() &&
      (port.size() > 5 || !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
       !absl::SimpleAtoi(port, &parsed.port) || parsed.port < 1 || parsed.port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("bad port \"", port, "\""));
  }
  parsed.host = std::string(host);
  parsed.host_header = std::string(authority);
  return parsed;
}

PlainHttpConnection::~PlainHttpConnection() { Close(); }

void PlainHttpConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buffered_.clear();
}

absl::Status PlainHttpConnection::Connect(const PlainHttpUrl& url, MonotonicTime deadline) {
  Close();
  ASSIGN_OR_RETURN(const std::vector<sockaddr_storage> addresses,
                   Resolve(url.host, url.port, clock_, deadline));
  absl::Status last = absl::UnavailableError("no address to connect to");
  for (const sockaddr_storage& address : addresses) {
    const int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last = SystemError("socket", errno);
      continue;
    }
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), AddressLength(address)) != 0 &&
        errno != EINPROGRESS) {
      last = SystemError(absl::StrCat("connect to ", url.host_header), errno);
      ::close(fd);
      continue;
    }
    absl::StatusOr<bool> writable = WaitFor(fd, POLLOUT, clock_, deadline);
    if (!writable.ok() || !*writable) {
      ::close(fd);
      if (!writable.ok()) return writable.status();
      return TimedOut(absl::StrCat("connecting to ", url.host_header));
    }
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      last = SystemError(absl::StrCat("connect to ", url.host_header), error);
      ::close(fd);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fd_ = fd;
    connected_host_ = url.host;
    connected_port_ = url.port;
    ++connections_opened_;
    return absl::OkStatus();
  }
  return last;
}

absl::StatusOr<PlainHttpResponse> PlainHttpConnection::Get(const PlainHttpUrl& url,
                                                           int64_t max_bytes,
                                                           MonotonicTime deadline) {
  const bool reusing = fd_ >= 0 && connected_host_ == url.host && connected_port_ == url.port;
  if (!reusing) RETURN_IF_ERROR(Connect(url, deadline));
  bool sent_nothing_back = false;
  absl::StatusOr<PlainHttpResponse> response =
      Exchange(url, max_bytes, deadline, &sent_nothing_back);
  if (!response.ok()) {
    Close();
    // A kept connection the server has closed meanwhile answers nothing at
    // all; a GET may be sent again, once, on a new one.
    if (reusing && sent_nothing_back && !absl::IsDeadlineExceeded(response.status())) {
      RETURN_IF_ERROR(Connect(url, deadline));
      response = Exchange(url, max_bytes, deadline, &sent_nothing_back);
      if (!response.ok()) Close();
    }
  }
  return response;
}

absl::StatusOr<PlainHttpResponse> PlainHttpConnection::Exchange(const PlainHttpUrl& url,
                                                                int64_t max_bytes,
                                                                MonotonicTime deadline,
                                                                bool* sent_nothing_back) {
  *sent_nothing_back = true;
  const std::string request =
      absl::StrCat("GET ", url.target, " HTTP/1.1\r\nHost: ", url.host_header,
                   "\r\nUser-Agent: weightpath-agent\r\nAccept: */*\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      ASSIGN_OR_RETURN(const bool writable, WaitFor(fd_, POLLOUT, clock_, deadline));
      if (!writable) return TimedOut("sending the request");
      continue;
    }
    return SystemError("send", errno);
  }

  // Appends what the peer sends next to buffered_; false at its end.
  const auto read_more = [&](absl::string_view step) -> absl::StatusOr<bool> {
    for (;;) {
      char chunk[kReadChunkBytes];
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n > 0) {
        buffered_.append(chunk, static_cast<size_t>(n));
        *sent_nothing_back = false;
        return true;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return SystemError("recv", errno);
      ASSIGN_OR_RETURN(const bool readable, WaitFor(fd_, POLLIN, clock_, deadline));
      if (!readable) return TimedOut(step);
    }
  };
  // Reads until buffered_ holds `bytes` bytes; UNAVAILABLE at an early end.
  const auto fill = [&](size_t bytes, absl::string_view step) -> absl::Status {
    while (buffered_.size() < bytes) {
      ASSIGN_OR_RETURN(const bool more, read_more(step));
      if (!more) return absl::UnavailableError(absl::StrCat("connection closed while ", step));
    }
    return absl::OkStatus();
  };
  // The next CRLF-terminated line, at most `limit` bytes, consumed.
  const auto read_line = [&](size_t limit, absl::string_view step) -> absl::StatusOr<std::string> {
    size_t end;
    while ((end = buffered_.find("\r\n")) == std::string::npos) {
      if (buffered_.size() > limit) {
        return absl::UnavailableError(absl::StrCat("a line longer than ", limit, " bytes while ",
                                                   step));
      }
      ASSIGN_OR_RETURN(const bool more, read_more(step));
      if (!more) return absl::UnavailableError(absl::StrCat("connection closed while ", step));
    }
    if (end > limit) {
      return absl::UnavailableError(absl::StrCat("a line longer than ", limit, " bytes while ",
                                                 step));
    }
    std::string line = buffered_.substr(0, end);
    buffered_.erase(0, end + 2);
    return line;
  };

  Head head;
  for (int informational = 0;; ++informational) {
    size_t end;
    while ((end = buffered_.find("\r\n\r\n")) == std::string::npos) {
      if (static_cast<int64_t>(buffered_.size()) > kMaxHeaderBytes) break;
      ASSIGN_OR_RETURN(const bool more, read_more("waiting for the response headers"));
      if (!more) {
        return absl::UnavailableError(buffered_.empty()
                                          ? "connection closed before any response"
                                          : "connection closed inside the response headers");
      }
    }
    if (end == std::string::npos || static_cast<int64_t>(end) + 4 > kMaxHeaderBytes) {
      return absl::UnavailableError(
          absl::StrCat("response headers longer than ", kMaxHeaderBytes, " bytes"));
    }
    ASSIGN_OR_RETURN(head, ParseHead(absl::string_view(buffered_).substr(0, end)));
    buffered_.erase(0, end + 4);
    if (head.status >= 200) break;
    if (head.status == 101 || informational >= kMaxInformationalResponses) {
      return absl::UnavailableError(absl::StrCat("unexpected HTTP ", head.status));
    }
  }

  PlainHttpResponse response;
  response.status = head.status;
  response.location = head.location;
  const bool success = head.status >= 200 && head.status < 300;
  // An error's body is not wanted; it is read (bounded) only to keep the
  // connection for the next request.
  const int64_t limit = success ? max_bytes : std::min(max_bytes, kMaxErrorBodyBytes);
  const auto over_limit = [&]() -> absl::Status {
    Close();
    if (!success) return absl::OkStatus();  // the status is the answer
    return absl::ResourceExhaustedError(
        absl::StrCat("more than the ", max_bytes, " bytes allowed"));
  };
  bool reusable = head.http11 && !head.connection_close;
  if (head.status == 204 || head.status == 304) {
    // No body by definition.
  } else if (head.chunked) {
    for (;;) {
      ASSIGN_OR_RETURN(std::string line, read_line(kMaxChunkLineBytes, "reading a chunk size"));
      const absl::string_view size_text =
          absl::StripAsciiWhitespace(absl::string_view(line).substr(0, line.find(';')));
      uint64_t size = 0;
      if (size_text.empty() || size_text.size() > 15 ||
          !std::all_of(size_text.begin(), size_text.end(), absl::ascii_isxdigit) ||
          !absl::SimpleHexAtoi(size_text, &size)) {
        return absl::UnavailableError(
            absl::StrCat("bad chunk size \"", ControlEscaped(size_text.substr(0, 32)), "\""));
      }
      if (size == 0) break;
      if (static_cast<int64_t>(response.body.size() + size) > limit) {
        RETURN_IF_ERROR(over_limit());
        response.body.clear();
        return response;
      }
      RETURN_IF_ERROR(fill(size + 2, "reading a chunk"));
      if (buffered_.compare(size, 2, "\r\n") != 0) {
        return absl::UnavailableError("a chunk not followed by CRLF");
      }
      response.body.append(buffered_, 0, size);
      buffered_.erase(0, size + 2);
    }
    // Trailers, ignored, bounded like the headers.
    int64_t trailer_bytes = 0;
    for (;;) {
      ASSIGN_OR_RETURN(std::string trailer,
                       read_line(static_cast<size_t>(kMaxHeaderBytes), "reading the trailers"));
      if (trailer.empty()) break;
      trailer_bytes += static_cast<int64_t>(trailer.size()) + 2;
      if (trailer_bytes > kMaxHeaderBytes) {
        return absl::UnavailableError(
            absl::StrCat("trailers longer than ", kMaxHeaderBytes, " bytes"));
      }
    }
  } else if (head.content_length) {
    if (*head.content_length > limit) {
      RETURN_IF_ERROR(over_limit());
      return response;
    }
    RETURN_IF_ERROR(fill(static_cast<size_t>(*head.content_length), "reading the body"));
    response.body = buffered_.substr(0, static_cast<size_t>(*head.content_length));
    buffered_.erase(0, static_cast<size_t>(*head.content_length));
  } else {
    // Delimited by the end of the connection.
    reusable = false;
    for (;;) {
      if (static_cast<int64_t>(buffered_.size()) > limit) {
        RETURN_IF_ERROR(over_limit());
        return response;
      }
      ASSIGN_OR_RETURN(const bool more, read_more("reading the body"));
      if (!more) break;
    }
    response.body = std::move(buffered_);
    buffered_.clear();
  }
  if (!reusable) Close();
  return response;
}

}  // namespace weightpath::agent
