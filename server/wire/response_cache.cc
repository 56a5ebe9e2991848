#include "server/wire/response_cache.h"

#include <string>

namespace weightpath::server {

void DecidedPartCache::Fill(const Snapshot& snapshot, const ResolvedDecision& decision,
                            DecidedPart* part) {
  part->message.Clear();
  FillDecidedPart(decision, snapshot, &part->message);
  part->encoded = EncodeDecidedPart(part->message);
  part->acted_on = ActedOnBytes(part->message);
  part->decision_etag = DecisionEtag(part->acted_on, v1::ResolveWeightPathResponse());
}

const DecidedPart& DecidedPartCache::Find(const SnapshotHolder& holder, const Snapshot& current,
                                          const ResolvedDecision& decision) {
  if (snapshot_.get() != &current) {
    entries_.clear();
    snapshot_ = holder.Share();
    if (snapshot_.get() != &current) {
      // A reload landed between this call's decision and now: answer from
      // the snapshot the call decided against, without keeping the bytes.
      snapshot_.reset();
      Fill(current, decision, &uncached_);
      return uncached_;
    }
  }
  const policy::Decision& policy_decision = decision.shaped.resolution.decision;
  const Key key{decision.artifact,
                decision.path,
                policy_decision.rule,
                static_cast<int>(policy_decision.hardware_class),
                static_cast<int>(policy_decision.effective_priority),
                decision.artifact_pinned()};
  auto [it, inserted] = entries_.try_emplace(key);
  if (inserted) {
    if (entries_.size() > kMaxEntries) {
      entries_.clear();
      it = entries_.try_emplace(key).first;
    }
    it->second = std::make_unique<DecidedPart>();
    Fill(current, decision, it->second.get());
  }
  return *it->second;
}

DecidedPartCache& ThreadDecidedPartCache() {
  thread_local DecidedPartCache cache;
  return cache;
}

}  // namespace weightpath::server
