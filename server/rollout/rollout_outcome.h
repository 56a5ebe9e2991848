// WeightPath.ReportOutcome without gRPC: validate, refuse a report about
// another device under mutual TLS, record it durably (a repeated
// idempotency key stores nothing), and count it by rollout and cohort.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/rollout/rollout_cache.h"
#include "server/rollout/rollout_metrics.h"
#include "store/store.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

struct OutcomeContext {
  store::FleetStore* store = nullptr;
  RolloutCache* cache = nullptr;
  RolloutMetrics* metrics = nullptr;  // optional
  // The device id the client certificate proves, when the channel is mTLS.
  std::optional<std::string> authenticated_device_id;
  absl::Time received_at;
};

// INVALID_ARGUMENT naming the field (from the store's validation);
// PERMISSION_DENIED naming both ids when the certificate is another device's;
// NOT_FOUND naming rollout_id when it is set and names no rollout (neither
// in `cache` nor in the store), so outcome counters are labelled only by
// rollouts operators created.
absl::StatusOr<v1::ReportOutcomeResponse> HandleReportOutcome(const v1::ReportOutcomeRequest& request,
                                                              const OutcomeContext& context);

}  // namespace weightpath::server
