// The automatic side of rollouts on each replica: every few seconds, for
// each PROGRESSING rollout, count members and control from the registry and
// the stored outcomes, let deploy::EvaluateRollout decide, and store the
// result with a compare-and-swap. Several replicas may run it at once: the
// loser of a race gets ABORTED and simply tries again on its next pass.
// Every pass also refreshes the resolve cache, dropping rollouts deleted
// through any replica.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "deploy/rollout_evaluation.h"
#include "server/rollout/rollout_admin.h"

namespace weightpath::server {

// The audit trail's caller for the steps the reconcile loop takes itself.
inline constexpr char kRolloutDriverIdentity[] = "server:rollout-driver";

// The audit event of an automatic step (`rollout` as read, `next` as
// stored); no event for kHold and kUnchanged. The replica is left empty.
std::optional<v1::AuditEvent> RolloutStepAuditEvent(const v1::Rollout& rollout,
                                                    const v1::Rollout& next,
                                                    const deploy::RolloutVerdict& verdict,
                                                    absl::Time now);

struct ReconcileResult {
  std::string rollout_id;
  deploy::RolloutStep step = deploy::RolloutStep::kUnchanged;
  uint32_t stage = 0;
  std::string reason;
  bool stored = false;  // false: another writer changed it first, or nothing to store
};

class RolloutReconciler {
 public:
  explicit RolloutReconciler(RolloutDependencies dependencies);
  ~RolloutReconciler();  // stops the thread if running

  // One pass at deps.now(). UNAVAILABLE when the store is; a rollout that
  // lost a race is reported with stored = false and retried next pass.
  absl::StatusOr<std::vector<ReconcileResult>> ReconcileOnce();

  // Runs ReconcileOnce every `interval` on a thread until Stop().
  void Start(absl::Duration interval);
  void Stop();

 private:
  RolloutDependencies deps_;
  absl::Notification stop_;
  std::unique_ptr<std::thread> thread_;
};

}  // namespace weightpath::server
