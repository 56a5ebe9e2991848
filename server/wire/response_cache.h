// The decided part of a response (server/resolver.h), encoded once per
// decision and snapshot, then sent as those same bytes by every call that
// reaches the decision. The rationale, notes, expected figures and engine
// kwargs make up most of a response; building and serializing them on each
// call cost more than the policy, validation and metrics together.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "server/config/policy_snapshot.h"
#include "server/wire/resolve_wire.h"
#include "server/resolve/resolver.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

struct DecidedPart {
  v1::ResolveWeightPathResponse message;
  DecidedEncoding encoded;  // message, serialized in pieces (server/resolve_wire.h)
  std::string acted_on;     // ActedOnBytes(message)
  std::string decision_etag;  // for a call that no rollout shapes

  // The call's decision_etag, given its finished per-call part.
  std::string EtagFor(const v1::ResolveWeightPathResponse& per_call) const {
    if (!per_call.has_rollout() && !per_call.has_artifact()) return decision_etag;
    return DecisionEtag(acted_on, per_call);
  }
};

// One per thread (ThreadDecidedPartCache), so a lookup takes no lock and
// touches no shared cache line. Entries belong to one snapshot: the first
// lookup against another snapshot drops them all.
class DecidedPartCache {
 public:
  // The part for `decision`, which was decided against `current` (the
  // snapshot `holder` handed this thread). Valid until this thread's next
  // Find.
  const DecidedPart& Find(const SnapshotHolder& holder, const Snapshot& current,
                          const ResolvedDecision& decision);

  size_t size() const { return entries_.size(); }

 private:
  // Everything FillDecidedPart reads, by identity within the snapshot: the
  // artifact pointer stands for (model, path name).
  using Key = std::tuple<const CatalogArtifact*, const policy::PathDefinition*, const policy::Rule*,
                         int /*hardware class*/, int /*priority*/, bool /*artifact pinned*/>;
  // A policy has a handful of paths, rules and models; this only bounds a
  // pathological catalog.
  static constexpr size_t kMaxEntries = 4096;

  static void Fill(const Snapshot& snapshot, const ResolvedDecision& decision, DecidedPart* part);

  // Held so that no other snapshot can reuse the address the keys point into.
  std::shared_ptr<const Snapshot> snapshot_;
  absl::flat_hash_map<Key, std::unique_ptr<DecidedPart>> entries_;
  DecidedPart uncached_;
};

DecidedPartCache& ThreadDecidedPartCache();

}  // namespace weightpath::server
