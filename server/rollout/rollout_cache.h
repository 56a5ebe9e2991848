// The rollouts every resolve consults, held in memory: refreshed from the
// store every few seconds and updated at once for each change made through
// this replica, so a resolve never waits on the database.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/config/published.h"
#include "store/store.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::server {

class RolloutCache {
 public:
  using Rollouts = std::vector<v1::Rollout>;

  RolloutCache();

  // An immutable set the caller owns; it keeps using the one it took even
  // if a refresh lands meanwhile.
  std::shared_ptr<const Rollouts> Current() const { return current_.Share(); }
  // The same for one resolve, through the thread's own copy of the pointer
  // (no lock), held for as long as the Pin lives.
  Published<Rollouts>::Pin ForThisCall() const { return current_.Current(); }

  // Re-reads every rollout. Per id the higher revision wins, so a refresh
  // that read the database just before this replica's own update cannot
  // undo it. On error the cache keeps what it had (resolves go on).
  absl::Status Refresh(store::FleetStore& store);

  // Records a rollout this replica just stored at `revision`.
  void Publish(const v1::Rollout& rollout, int64_t revision);

 private:
  void Rebuild() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  mutable absl::Mutex mutex_;
  std::map<std::string, store::StoredRollout> by_id_ ABSL_GUARDED_BY(mutex_);
  Published<Rollouts> current_;
};

}  // namespace weightpath::server
