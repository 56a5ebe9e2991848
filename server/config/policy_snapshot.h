// The policy and the catalog a request is answered with, published as one
// immutable pair so a reload can never be observed half-done.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "policy/policy.h"
#include "server/config/catalog.h"
#include "server/config/published.h"

namespace weightpath::server {

struct Snapshot {
  std::shared_ptr<const policy::Policy> policy;
  std::shared_ptr<const Catalog> catalog;
  // SHA-256 (64 hex digits) of the policy file's bytes as read, or of the
  // bundled policy's; empty where a test builds a snapshot by hand. The
  // audit trail records it beside the version.
  std::string policy_sha256;
};

// Readers take the current snapshot on every request; the reload watcher
// replaces it rarely (server/published.h). Empty until the first Publish();
// Current() needs one published snapshot.
class SnapshotHolder : public Published<Snapshot> {
 public:
  using Published<Snapshot>::Published;
};

}  // namespace weightpath::server
