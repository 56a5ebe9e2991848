// The decided part of a response (server/resolver.h), encoded once per
// decision and snapshot, then sent as those same bytes by every call that
// reaches the decision. The rationale, notes, expected figures and engine
// kwargs make up most of a response; building and serializing them on each
// call cost more than the policy, validation and metrics together.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/config/policy_snapshot.h"
#include "server/wire/resolve_wire.h"
#include "server/resolve/resolver.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

// Both answers to a call that nothing per call changes (no rollout shapes
// it, no fleet evidence applies), encoded once: such a call's per-call part
// is FillPerCallPart's for the part's path and this interval.
struct PlainAnswers {
  bool built = false;
  uint32_t resolve_interval_seconds = 0;
  grpc::ByteBuffer full;       // EncodeResolveResponse
  grpc::ByteBuffer unchanged;  // EncodeUnchangedResponse
};

struct DecidedPart {
  v1::ResolveWeightPathResponse message;
  DecidedEncoding encoded;  // message, serialized in pieces (server/resolve_wire.h)
  std::string acted_on;     // ActedOnBytes(message)
  std::string decision_etag;  // for a call that no rollout shapes
  // Filled on first use (PlainAnswersFor); the part is the thread's own.
  mutable PlainAnswers plain;

  // The call's decision_etag, given its finished per-call part.
  std::string EtagFor(const v1::ResolveWeightPathResponse& per_call) const {
    if (!per_call.has_rollout() && !per_call.has_artifact()) return decision_etag;
    return DecisionEtag(acted_on, per_call);
  }

  // The answers for `decision` (which this part was found for) when no
  // rollout shaped it and no fleet evidence applies; the same bytes as the
  // per-call way (FillPerCallPart, EncodeResolveResponse or
  // EncodeUnchangedResponse), made once per interval.
  const PlainAnswers& PlainAnswersFor(const ResolvedDecision& decision) const;
};

// One per thread (ThreadDecidedPartCache), so a lookup takes no lock and
// touches no shared cache line. Entries belong to one snapshot: the first
// lookup against another snapshot drops them all.
class DecidedPartCache {
 public:
  // The part for `decision`, which was decided against `current` (the
  // snapshot `holder` handed this thread). Valid until this thread's next
  // Find. A decision whose engine arguments are derived from the device
  // (ResolvedDecision::per_device_engine_args) gets a part built for it
  // alone, never kept.
  const DecidedPart& Find(const SnapshotHolder& holder, const Snapshot& current,
                          const ResolvedDecision& decision);

  size_t size() const { return entries_.size(); }

  // For a call the profile memo answered (server/resolve/profile_memo.h): the part
  // this thread found for the same policy decision and requested `model`
  // against `current`, its PlainAnswers built; null when there is none.
  // Spares such a call the catalog lookups and the decision's assembly.
  const DecidedPart* FindKnown(const Snapshot& current, const policy::Decision& decision,
                               absl::string_view model) const;
  // After Find gave `part` for that call (and PlainAnswersFor built its
  // answers): remembered for FindKnown until the snapshot changes.
  void RememberKnown(const Snapshot& current, const policy::Decision& decision,
                     absl::string_view model, const DecidedPart& part);

 private:
  // Everything FillDecidedPart reads, by identity within the snapshot: the
  // artifact pointer stands for (model, path name).
  using Key = std::tuple<const CatalogArtifact*, const policy::PathDefinition*, const policy::Rule*,
                         int /*hardware class*/, int /*priority*/, bool /*artifact pinned*/>;
  // A policy has a handful of paths, rules and models; this only bounds a
  // pathological catalog.
  static constexpr size_t kMaxEntries = 4096;

  static void Fill(const Snapshot& snapshot, const ResolvedDecision& decision, DecidedPart* part);
  void Clear();

  // FindKnown's entries: a fleet asks for few models, and a policy has few
  // (rule, path) pairs; the oldest goes when all are taken.
  struct KnownEntry {
    const policy::PathDefinition* path = nullptr;  // null: empty
    const policy::Rule* rule = nullptr;
    policy::HardwareClass hardware_class = policy::HardwareClass::kX86Cpu;
    v1::Priority effective_priority = v1::PRIORITY_UNSPECIFIED;
    std::string model;
    const DecidedPart* part = nullptr;
  };
  static constexpr size_t kKnownEntries = 16;
  std::array<KnownEntry, kKnownEntries> known_;
  size_t next_known_ = 0;

  // Held so that no other snapshot can reuse the address the keys point into.
  std::shared_ptr<const Snapshot> snapshot_;
  absl::flat_hash_map<Key, std::unique_ptr<DecidedPart>> entries_;
  DecidedPart uncached_;
};

DecidedPartCache& ThreadDecidedPartCache();

}  // namespace weightpath::server
