#include "server/rollout/rollout_cache.h"

#include <algorithm>

namespace weightpath::server {

RolloutCache::RolloutCache() : current_(std::make_shared<const Rollouts>()) {}

absl::Status RolloutCache::Refresh(store::FleetStore& store) {
  absl::StatusOr<std::vector<store::StoredRollout>> listed = store.ListRollouts();
  if (!listed.ok()) return listed.status();
  absl::MutexLock lock(&mutex_);
  for (store::StoredRollout& stored : *listed) {
    auto found = by_id_.find(stored.rollout.id());
    if (found == by_id_.end() || found->second.revision <= stored.revision) {
      by_id_[stored.rollout.id()] = std::move(stored);
    }
  }
  Rebuild();
  return absl::OkStatus();
}

void RolloutCache::Publish(const v1::Rollout& rollout, int64_t revision) {
  absl::MutexLock lock(&mutex_);
  store::StoredRollout& slot = by_id_[rollout.id()];
  if (slot.revision > revision) return;
  slot.rollout = rollout;
  slot.revision = revision;
  Rebuild();
}

void RolloutCache::Rebuild() {
  auto rollouts = std::make_shared<Rollouts>();
  rollouts->reserve(by_id_.size());
  for (const auto& [id, stored] : by_id_) rollouts->push_back(stored.rollout);
  current_.Publish(std::move(rollouts));
}

}  // namespace weightpath::server
