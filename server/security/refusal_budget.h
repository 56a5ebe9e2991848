// How many refused FleetAdmin calls each operator identity may write to the
// audit trail. Refusals are audited because a viewer probing for what it may
// do is worth seeing; but any authenticated viewer can send them as fast as
// the network allows (12,000 rows in 4 s, 28.7 MB, and the real events pushed
// out of the default view), so each identity gets a token bucket of refusals:
// a burst, then a steady rate. A refusal beyond it is not written, only
// counted; the next one that is written says how many were left out.
//
// Identities are the configured operators' names or, under mutual TLS,
// certificate identities, which anyone with a certificate of the operators'
// CA can vary: the table is bounded, and when full, identities whose bucket
// has filled again (nothing owed) are forgotten first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace weightpath::server {

class RefusalBudget {
 public:
  struct Options {
    double per_second = 0.5;  // refusals written per identity, steadily
    double burst = 30;        // and back to back
    size_t max_identities = 4096;
  };
  // Whether to write this refusal, and if so, how many of the identity's
  // refusals before it were left out since the last one written.
  struct Decision {
    bool record = true;
    uint64_t left_out_before = 0;
  };

  RefusalBudget(Options options, Clock* clock) : options_(options), clock_(clock) {}

  Decision Take(absl::string_view identity);

 private:
  struct Bucket {
    double tokens = 0;
    MonotonicTime updated;
    uint64_t left_out = 0;
  };
  // Tops `bucket` up to `now`.
  void Refill(Bucket& bucket, MonotonicTime now) const;

  const Options options_;
  Clock* const clock_;
  absl::Mutex mutex_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace weightpath::server
