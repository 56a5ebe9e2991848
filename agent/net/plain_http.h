// A bounded HTTP/1.1 GET over a plain TCP socket, for the agent's small
// downloads from http:// URLs (the TUF metadata, every boot).
//
// Why not libcurl: libcurl and the 27 libraries it needs add about 4.6 MiB
// to the resident set of a process that only fetches a few kilobytes of
// timestamp.json, and the agent's cached boot must fit in 20 MB. libcurl is
// kept for https:// and for the large artifact downloads (ranges, resume).
//
// What the server sends is hostile input, bounded everywhere:
//  - the status line and headers together at most kMaxHeaderBytes;
//  - the body at most `max_bytes`: a Content-Length above it is refused
//    before any of the body, a chunked or close-delimited body is cut at
//    the first byte past it;
//  - every step (name lookup, connect, send, each read) within `deadline`
//    on the monotonic clock, so a peer that accepts and says nothing, or
//    trickles, cannot hold the caller past it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"

namespace weightpath::agent {

inline constexpr int64_t kMaxHeaderBytes = 64 * 1024;

// An http:// URL split for a request. `target` is what follows the
// authority ("/" when nothing does), query included.
struct PlainHttpUrl {
  std::string host;  // without the brackets of an IPv6 literal
  int port = 80;
  std::string target;
  std::string host_header;  // host[:port] as the URL wrote it
};
// INVALID_ARGUMENT unless `url` is http://host[:port][/...] without
// user information (those go to libcurl, or are refused by the caller).
absl::StatusOr<PlainHttpUrl> ParsePlainHttpUrl(absl::string_view url);

struct PlainHttpResponse {
  int status = 0;
  std::string body;
  std::optional<std::string> location;  // the Location header of a redirect
};

// One connection, kept open between requests to the same host and port
// while the server allows it (HTTP/1.1 without Connection: close and a body
// of known length).
class PlainHttpConnection {
 public:
  explicit PlainHttpConnection(Clock* clock) : clock_(clock) {}
  ~PlainHttpConnection();
  PlainHttpConnection(const PlainHttpConnection&) = delete;
  PlainHttpConnection& operator=(const PlainHttpConnection&) = delete;

  // Errors name what failed, not the URL (the caller adds it):
  //   RESOURCE_EXHAUSTED  a body over max_bytes (the message says "more than")
  //   DEADLINE_EXCEEDED   the deadline passed
  //   UNAVAILABLE         lookup, connect or transfer failed; a malformed answer
  // A redirect is returned as a response with `location`; the caller follows.
  absl::StatusOr<PlainHttpResponse> Get(const PlainHttpUrl& url, int64_t max_bytes,
                                        MonotonicTime deadline);

  // How many TCP connections were opened (for tests of reuse).
  int connections_opened() const { return connections_opened_; }

 private:
  absl::Status Connect(const PlainHttpUrl& url, MonotonicTime deadline);
  absl::StatusOr<PlainHttpResponse> Exchange(const PlainHttpUrl& url, int64_t max_bytes,
                                             MonotonicTime deadline, bool* sent_nothing_back);
  void Close();

  Clock* clock_;
  int fd_ = -1;
  std::string connected_host_;
  int connected_port_ = 0;
  std::string buffered_;  // bytes read past the previous response
  int connections_opened_ = 0;
};

}  // namespace weightpath::agent
