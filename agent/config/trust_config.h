// The agent config's `trust` block: where a device's trust in signed
// artifacts starts (a TUF root provisioned with it) and where the signed
// metadata is served.
//
//   trust:
//     root: /etc/weightpath/root.json                  # trust.root
//     metadata_url: https://mirror.example.net/metadata  # trust.metadata_url
//
// Without the block the agent installs what the server names, checked
// against the server's own sha256 (as before trust existed); with it, only
// what the verified targets metadata lists (trust_client.h).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/strict_yaml.h"

namespace weightpath::agent {

struct TrustConfig {
  // The initial trusted root.json. Read at each update only while no
  // trusted state exists in state_dir (the first boot, or a state that no
  // longer verifies): a later root comes from the repository, signed by
  // the one before it.
  std::string root;
  // Base URL of the repository's metadata (http:// or https://): a root is
  // fetched as METADATA_URL/N.root.json, the timestamp as
  // METADATA_URL/timestamp.json. Any static HTTP server will do; TLS is not
  // what the metadata's trust rests on.
  std::string metadata_url;
};

// The `trust` entry of a config. Both keys are required; an unknown key, a
// value that is not a non-empty string, or a metadata_url that is not an
// http(s) URL without query or fragment is INVALID_ARGUMENT as
// "SOURCE:LINE:COLUMN: trust.KEY: reason", like every other config error.
absl::StatusOr<TrustConfig> ParseTrustConfig(const yaml::Reader& reader, const yaml::Entry& entry);

}  // namespace weightpath::agent
