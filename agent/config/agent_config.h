// The agent's boot configuration, read from one YAML file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config/trust_config.h"
#include "google/protobuf/map.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// PEM files for the channel to the server. An empty `ca` trusts the system
// roots; `cert` and `key` come together (mutual TLS) or not at all.
struct TlsFiles {
  std::string ca;
  std::string cert;
  std::string key;
};

struct AgentConfig {
  std::string server;                // host:port of weightpath-server
  std::optional<TlsFiles> tls;       // absent: plaintext (loopback, labs)
  std::string device_id;
  std::string model;                 // empty: the catalog's default model
  v1::Priority priority = v1::PRIORITY_SPEED;
  google::protobuf::Map<std::string, std::string> labels;
  std::string state_dir = "/var/lib/weightpath";
  std::string cache_dir = "/var/cache/weightpath";
  std::string decision_file = "/run/weightpath/decision.json";
  std::string env_file = "/run/weightpath/engine.env";
  // Bytes a download must leave free on cache_dir's volume, for the state
  // files written after it (config cache_min_free_bytes, or its older name
  // cache_reserve_bytes; BuildCacheOptions::min_free_bytes).
  uint64_t cache_reserve_bytes = uint64_t{32} << 20;
  // Blobs and partial downloads in cache_dir together at most this many
  // bytes; 0: no cap (BuildCacheOptions::max_bytes).
  uint64_t cache_max_bytes = 0;
  // Files of one build downloaded at once, 1 to 16.
  int parallel_downloads = 4;
  // Bytes per second over all downloads together; 0: no cap.
  uint64_t max_download_rate = 0;
  // Site caches or mirrors that serve blobs by content address
  // (<base>/blobs/sha256/<hex>), tried in this order before a file's own
  // uri: whatever they send is checked against the digest the build lists,
  // so they need no trust. http:// or https:// base URLs without a query.
  std::vector<std::string> artifact_mirrors;
  // A mirror that sends less than kMirrorMinRate (build_cache.h) bytes/s for this long (or
  // takes longer to connect) is skipped: the next source gets the time.
  absl::Duration mirror_stall_timeout = absl::Seconds(10);
  // Bounds the whole boot: resolve with its retries, then the download.
  absl::Duration budget = absl::Seconds(30);
  // Deadline of a single ResolveWeightPath call (clipped to what is left of
  // the budget).
  absl::Duration call_timeout = absl::Seconds(5);
  // Exponential backoff between retries: the n-th wait is drawn from
  // [0, min(retry_max_delay, retry_base_delay * 2^n)].
  absl::Duration retry_base_delay = absl::Milliseconds(250);
  absl::Duration retry_max_delay = absl::Seconds(8);
  // `weightpath-agent run` only: the shell command that makes the engine
  // pick up a new decision (e.g. "systemctl restart vllm-engine"), and an
  // optional one whose success means the engine really serves it.
  std::string apply_command;
  std::string engine_check_command;
  // Used between resolves when the server suggests no interval.
  absl::Duration resolve_interval = absl::Minutes(5);
  // The bounds of the interval the server suggests (resolve_interval_seconds,
  // any uint32) and of its pushback: a hostile or broken server must not put
  // the agent to sleep for 119 years (no re-resolve, trust update or report
  // until a restart), nor make a fleet poll every second.
  absl::Duration min_resolve_interval = absl::Seconds(30);
  absl::Duration max_resolve_interval = absl::Hours(24);
  // Signed artifacts (TUF, trust_client.h); absent: the server's sha256 is
  // the only check, as before.
  std::optional<TrustConfig> trust;
};

// At most this many artifact_mirrors, each at most this long.
inline constexpr size_t kMaxArtifactMirrors = 8;
inline constexpr size_t kMaxMirrorUrlBytes = 2048;

// A base URL blobs are asked of as <base>/blobs/sha256/<hex> (a mirror, a
// site cache's upstream): http:// or https://, a host, no user information,
// query, fragment, whitespace or control bytes, at most kMaxMirrorUrlBytes.
// Returned without trailing slashes; INVALID_ARGUMENT saying what is wrong
// (the caller names the key or flag).
absl::StatusOr<std::string> ValidateBlobBaseUrl(absl::string_view url);

// Parses a config document. `source_name` labels errors ("agent.yaml:7:
// ..."); `root` is where /etc/machine-id is read from when device_id is not
// set ("/" on a device, a temporary tree in tests). Every fault, including
// an unknown key, is INVALID_ARGUMENT naming the line and the key.
absl::StatusOr<AgentConfig> ParseAgentConfig(absl::string_view yaml_text,
                                             absl::string_view source_name,
                                             absl::string_view root = "/");

// Reads and parses `path`; NOT_FOUND when the file cannot be read,
// INVALID_ARGUMENT when it is not a regular file of at most 1 MiB
// (kMaxLocalInputBytes), both naming the path.
absl::StatusOr<AgentConfig> LoadAgentConfig(const std::string& path, absl::string_view root = "/");

}  // namespace weightpath::agent
