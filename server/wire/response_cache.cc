#include "server/wire/response_cache.h"

#include <string>

namespace weightpath::server {

void DecidedPartCache::Fill(const Snapshot& snapshot, const ResolvedDecision& decision,
                            DecidedPart* part) {
  part->message.Clear();
  part->plain = PlainAnswers();
  FillDecidedPart(decision, snapshot, &part->message);
  part->encoded = EncodeDecidedPart(part->message);
  part->acted_on = ActedOnBytes(part->message);
  part->decision_etag = DecisionEtag(part->acted_on, v1::ResolveWeightPathResponse());
}

const PlainAnswers& DecidedPart::PlainAnswersFor(const ResolvedDecision& decision) const {
  const uint32_t interval = decision.shaped.resolve_interval_seconds;
  if (plain.built && plain.resolve_interval_seconds == interval) return plain;
  v1::ResolveWeightPathResponse per_call;
  FillPerCallPart(decision, &per_call);
  per_call.set_decision_etag(EtagFor(per_call));
  EncodeResolveResponse(encoded, per_call, &plain.full);
  EncodeUnchangedResponse(message.policy_version(), per_call.resolve_interval_seconds(),
                          per_call.decision_etag(), &plain.unchanged);
  plain.resolve_interval_seconds = interval;
  plain.built = true;
  return plain;
}

void DecidedPartCache::Clear() {
  entries_.clear();
  known_ = {};
  next_known_ = 0;
}

const DecidedPart* DecidedPartCache::FindKnown(const Snapshot& current,
                                               const policy::Decision& decision,
                                               absl::string_view model) const {
  if (snapshot_.get() != &current) return nullptr;
  for (const KnownEntry& entry : known_) {
    if (entry.path == decision.path && entry.rule == decision.rule &&
        entry.hardware_class == decision.hardware_class &&
        entry.effective_priority == decision.effective_priority && entry.model == model) {
      return entry.part;
    }
  }
  return nullptr;
}

void DecidedPartCache::RememberKnown(const Snapshot& current, const policy::Decision& decision,
                                     absl::string_view model, const DecidedPart& part) {
  // Only parts this cache keeps for `current` (never uncached_, whose
  // contents the next call replaces).
  if (snapshot_.get() != &current || &part == &uncached_ || !part.plain.built) return;
  if (FindKnown(current, decision, model) != nullptr) return;
  KnownEntry& entry = known_[next_known_];
  next_known_ = (next_known_ + 1) % kKnownEntries;
  entry.path = decision.path;
  entry.rule = decision.rule;
  entry.hardware_class = decision.hardware_class;
  entry.effective_priority = decision.effective_priority;
  entry.model.assign(model.data(), model.size());
  entry.part = &part;
}

const DecidedPart& DecidedPartCache::Find(const SnapshotHolder& holder, const Snapshot& current,
                                          const ResolvedDecision& decision) {
  if (snapshot_.get() != &current) {
    Clear();
    snapshot_ = holder.Share();
    if (snapshot_.get() != &current) {
      // A reload landed between this call's decision and now: answer from
      // the snapshot the call decided against, without keeping the bytes.
      snapshot_.reset();
      Fill(current, decision, &uncached_);
      return uncached_;
    }
  }
  if (decision.per_device_engine_args()) {
    // Derived from this device's GPUs (free memory among them): no other
    // call can reuse the part, so it is not kept.
    Fill(current, decision, &uncached_);
    return uncached_;
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
      Clear();
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
