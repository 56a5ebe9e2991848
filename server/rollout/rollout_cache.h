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
  // Marks when a read of the store's rollouts began (BeginListing), so that
  // what this replica changed meanwhile is not undone by what it read.
  using ListingStart = uint64_t;

  RolloutCache();

  // An immutable set the caller owns; it keeps using the one it took even
  // if a refresh lands meanwhile.
  std::shared_ptr<const Rollouts> Current() const { return current_.Share(); }
  // The same for one resolve, through the thread's own copy of the pointer
  // (no lock), held for as long as the Pin lives.
  Published<Rollouts>::Pin ForThisCall() const { return current_.Current(); }

  // Re-reads every rollout (BeginListing, ListRollouts, Replace). On error
  // the cache keeps what it had (resolves go on).
  absl::Status Refresh(store::FleetStore& store);

  ListingStart BeginListing() const;
  // Makes the cache what the store listed since `start`: a rollout this
  // replica published or removed after `start` keeps its newer state; any
  // other rollout missing from `listed` was deleted (on any replica) and is
  // dropped. Returns the ids dropped that way. A rollout is newer than
  // another of its id by created_at (the id was deleted and reused), then by
  // revision.
  std::vector<std::string> Replace(const std::vector<store::StoredRollout>& listed,
                                   ListingStart start);

  // Records a rollout this replica just stored at `revision`.
  void Publish(const v1::Rollout& rollout, int64_t revision);
  // Forgets a rollout this replica just deleted from the store.
  void Remove(const v1::Rollout& rollout);

 private:
  struct Entry {
    store::StoredRollout stored;
    bool deleted = false;   // removed here; kept until a listing confirms it
    uint64_t changed = 0;   // the change count when this replica last set it
  };
  void Rebuild() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  mutable absl::Mutex mutex_;
  std::map<std::string, Entry> by_id_ ABSL_GUARDED_BY(mutex_);
  uint64_t changes_ ABSL_GUARDED_BY(mutex_) = 0;
  Published<Rollouts> current_;
};

}  // namespace weightpath::server
