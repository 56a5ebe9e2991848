// `weightpath-agent serve-cache`: a read-only HTTP server of blobs by
// content address, for the devices of one site, so a build crosses the
// site's uplink once.
//
// Only GET and HEAD of /blobs/sha256/<64 lowercase hex> (with one Range),
// and GET /metrics; every other path is 404, so it is no open proxy: the
// only URLs it ever asks are <upstream>/blobs/sha256/<hex> of the upstreams
// it was started with. It needs no trust and gives none: each device checks
// every blob against the digest its signed build lists. It still refuses to
// keep or serve a byte it has not verified itself: on a miss it fetches the
// whole blob from an upstream into its store (cache_dir/<sha256>.partial,
// resumed with Range, the same layout as the agent's cache_dir, so it can
// share a device's), checks its SHA-256, and only then serves it (fetch
// first, then serve: simple, and a wrong digest never reaches a client).
// Concurrent requests for one missing blob wait for a single upstream fetch.
//
// Bounds: the request head within `header_timeout` and 8 KiB, read by the
// acceptor without a thread (at most 1024 connections wait for theirs; one
// more closes the oldest), so idle clients cannot keep the devices out; at
// most `max_connections` requests served at once (more are answered 503
// and closed), a response within `request_timeout` and a client that takes
// nothing for `send_stall_timeout` dropped, no user-space buffer for a body
// (sendfile), and the store's blobs at most `max_bytes`, least recently
// served evicted first, never a blob being served or fetched.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace weightpath::agent {

struct SiteCacheOptions {
  std::string listen = "0.0.0.0:8470";  // host:port; port 0: the kernel picks
  std::string cache_dir;
  std::vector<std::string> upstreams;  // base URLs, http:// or https://
  uint64_t max_bytes = 0;              // 0: no cap
  // Requests being served (a thread each, about 10 KiB of memory); heads
  // being read are not counted. 256: a site of 100 devices booting at once
  // is served, not sent to the origin by 503s.
  int max_connections = 256;
  absl::Duration header_timeout = absl::Seconds(10);
  absl::Duration request_timeout = absl::Minutes(30);
  absl::Duration send_stall_timeout = absl::Seconds(30);
  // An upstream moving under 1 KiB/s for this long is given up on.
  absl::Duration upstream_stall_timeout = absl::Seconds(10);
};

// Counters of /metrics.
struct SiteCacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_served = 0;
  uint64_t bytes_from_upstream = 0;
  uint64_t refused_digests = 0;  // upstream bytes that did not verify
  uint64_t upstream_failures = 0;
  uint64_t not_found = 0;        // paths outside the blob form, and blobs no upstream has
  uint64_t refused_connections = 0;  // requests over max_connections
  uint64_t idle_dropped = 0;         // closed before a whole head: too slow, or too many waiting
  uint64_t evicted_bytes = 0;
};

class SiteCache {
 public:
  virtual ~SiteCache() = default;
  virtual int port() const = 0;
  virtual SiteCacheCounters counters() const = 0;
  // Stops accepting, and waits for the connections being served to end.
  virtual void Stop() = 0;
};

// Binds and starts serving in threads of its own. INVALID_ARGUMENT for an
// option that cannot work (naming it), UNAVAILABLE when the address cannot
// be bound.
absl::StatusOr<std::unique_ptr<SiteCache>> StartSiteCache(SiteCacheOptions options);

}  // namespace weightpath::agent
