#include "server/rollout/rollout_cache.h"

#include <set>
#include <tuple>

#include "common/proto_time.h"

namespace weightpath::server {
namespace {

// Which of two states of one id is the later: a rollout created later
// (the id was deleted and used again) first, then the higher revision.
bool IsNewer(const store::StoredRollout& a, const store::StoredRollout& b) {
  const absl::Time a_created = FromProtoTime(a.rollout.created_at());
  const absl::Time b_created = FromProtoTime(b.rollout.created_at());
  return std::tie(a_created, a.revision) > std::tie(b_created, b.revision);
}

bool SameRollout(const store::StoredRollout& a, const store::StoredRollout& b) {
  return FromProtoTime(a.rollout.created_at()) == FromProtoTime(b.rollout.created_at());
}

}  // namespace

RolloutCache::RolloutCache() : current_(std::make_shared<const Rollouts>()) {}

absl::Status RolloutCache::Refresh(store::FleetStore& store) {
  const ListingStart start = BeginListing();
  absl::StatusOr<std::vector<store::StoredRollout>> listed = store.ListRollouts();
  if (!listed.ok()) return listed.status();
  Replace(*listed, start);
  return absl::OkStatus();
}

RolloutCache::ListingStart RolloutCache::BeginListing() const {
  absl::MutexLock lock(&mutex_);
  return changes_;
}

std::vector<std::string> RolloutCache::Replace(const std::vector<store::StoredRollout>& listed,
                                               ListingStart start) {
  absl::MutexLock lock(&mutex_);
  std::set<std::string> seen;
  for (const store::StoredRollout& stored : listed) {
    const std::string& id = stored.rollout.id();
    seen.insert(id);
    auto found = by_id_.find(id);
    if (found != by_id_.end() && found->second.changed > start) {
      // Changed here while the listing was read: the listing may predate it.
      const Entry& local = found->second;
      if (local.deleted ? SameRollout(local.stored, stored) : !IsNewer(stored, local.stored)) {
        continue;
      }
    }
    by_id_[id] = Entry{stored, false, 0};
  }
  std::vector<std::string> dropped;
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    if (seen.count(it->first) > 0 || it->second.changed > start) {
      ++it;
      continue;
    }
    if (!it->second.deleted) dropped.push_back(it->first);
    it = by_id_.erase(it);
  }
  Rebuild();
  return dropped;
}

void RolloutCache::Publish(const v1::Rollout& rollout, int64_t revision) {
  absl::MutexLock lock(&mutex_);
  const store::StoredRollout stored{rollout, revision};
  auto found = by_id_.find(rollout.id());
  if (found != by_id_.end()) {
    const Entry& local = found->second;
    if (local.deleted ? SameRollout(local.stored, stored) : IsNewer(local.stored, stored)) return;
  }
  by_id_[rollout.id()] = Entry{stored, false, ++changes_};
  Rebuild();
}

void RolloutCache::Remove(const v1::Rollout& rollout) {
  absl::MutexLock lock(&mutex_);
  Entry& entry = by_id_[rollout.id()];
  entry.stored.rollout = rollout;
  entry.deleted = true;
  entry.changed = ++changes_;
  Rebuild();
}

void RolloutCache::Rebuild() {
  auto rollouts = std::make_shared<Rollouts>();
  rollouts->reserve(by_id_.size());
  for (const auto& [id, entry] : by_id_) {
    if (!entry.deleted) rollouts->push_back(entry.stored.rollout);
  }
  current_.Publish(std::move(rollouts));
}

}  // namespace weightpath::server
