#include "server/security/refusal_budget.h"

#include <algorithm>

namespace weightpath::server {

void RefusalBudget::Refill(Bucket& bucket, MonotonicTime now) const {
  const double elapsed = absl::ToDoubleSeconds(now - bucket.updated);
  if (elapsed > 0) {
    bucket.tokens = std::min(options_.burst, bucket.tokens + elapsed * options_.per_second);
    bucket.updated = now;
  }
}

RefusalBudget::Decision RefusalBudget::Take(absl::string_view identity) {
  const MonotonicTime now = clock_->MonotonicNow();
  absl::MutexLock lock(&mutex_);
  auto found = buckets_.find(identity);
  if (found == buckets_.end()) {
    if (buckets_.size() >= options_.max_identities) {
      // Forget the identities that owe nothing: their bucket is full again
      // and nothing was left out, so a fresh one is the same.
      absl::erase_if(buckets_, [&](auto& entry) {
        Refill(entry.second, now);
        return entry.second.tokens >= options_.burst && entry.second.left_out == 0;
      });
      // Still full: every identity is mid-flood. A newcomer is not written
      // rather than evicting an identity whose left-out count would be lost.
      if (buckets_.size() >= options_.max_identities) return Decision{false, 0};
    }
    found = buckets_.emplace(std::string(identity), Bucket{options_.burst, now, 0}).first;
  }
  Bucket& bucket = found->second;
  Refill(bucket, now);
  if (bucket.tokens < 1) {
    ++bucket.left_out;
    return Decision{false, 0};
  }
  bucket.tokens -= 1;
  Decision decision{true, bucket.left_out};
  bucket.left_out = 0;
  return decision;
}

}  // namespace weightpath::server
