// The downloads of the agent's TUF client: one HTTP GET per metadata file
// (trust.metadata_url + "/" + the file name the workflow asks for), on one
// connection reused for the whole update. http:// URLs are fetched over a
// plain socket (plain_http.h), so a boot that only checks timestamp.json
// never loads libcurl; https:// URLs, and redirects to them, over libcurl
// (curl_library.h). Redirects are followed, five at most.
//
// Every download is bounded twice:
//  - in bytes: at most MetadataRequest::max_bytes (the endless-data attack:
//    a mirror that never stops sending). A Content-Length above it is
//    refused before the body; without one, the transfer is cut at the first
//    byte past it. Nothing beyond max_bytes + one write buffer is held.
//  - in time: each request may take at most `call_timeout`, clipped to what
//    is left until `deadline` (monotonic time, like the rest of the boot
//    budget), connecting included; a mirror that answers nothing or
//    trickles is cut off there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "agent/net/plain_http.h"
#include "trust/client.h"
#include "trust/trusted_metadata_set.h"

namespace weightpath::agent {

class HttpMetadataFetcher {
 public:
  // `base_url`: trust.metadata_url (a trailing '/' is fine).
  HttpMetadataFetcher(std::string base_url, Clock* clock, MonotonicTime deadline,
                      absl::Duration call_timeout);
  ~HttpMetadataFetcher();
  HttpMetadataFetcher(const HttpMetadataFetcher&) = delete;
  HttpMetadataFetcher& operator=(const HttpMetadataFetcher&) = delete;

  // The file's bytes. Errors name the URL:
  //   NOT_FOUND           HTTP 403, 404 or 410 (how the chain of roots ends)
  //   RESOURCE_EXHAUSTED  more than request.max_bytes (endless data)
  //   DEADLINE_EXCEEDED   the time ran out (or none was left to start)
  //   UNAVAILABLE         any other HTTP status or transfer failure
  //   FAILED_PRECONDITION libcurl.so.4 cannot be loaded (https:// only)
  absl::StatusOr<std::string> Fetch(const trust::MetadataRequest& request);

  // The URL a file name is fetched from.
  std::string UrlFor(const std::string& file_name) const;
  int requests() const { return requests_; }

 private:
  struct Handle;
  absl::StatusOr<std::string> FetchWithCurl(const std::string& url, const std::string& location,
                                            const trust::MetadataRequest& request,
                                            absl::Duration limit);

  std::string base_url_;
  Clock* clock_;
  PlainHttpConnection plain_;
  MonotonicTime deadline_;
  absl::Duration call_timeout_;
  std::unique_ptr<Handle> handle_;  // created on the first request
  int requests_ = 0;
};

// Makes the fetcher of one update: a new HttpMetadataFetcher for each
// deadline, owned by the returned function.
using MetadataFetcherFactory = std::function<trust::MetadataFetcher(MonotonicTime deadline)>;
MetadataFetcherFactory HttpMetadataFetchers(std::string base_url, Clock* clock,
                                            absl::Duration call_timeout);

}  // namespace weightpath::agent
