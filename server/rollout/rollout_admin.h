// The rollout operations behind the FleetAdmin RPCs, over the store and the
// in-memory cache, independent of gRPC so tests drive them directly:
// create (validated by deploy::StartRollout), get, list, the operator
// transitions, spec updates and deletes, each retried on a stale revision
// (another replica or the reconcile loop wrote in between) by re-reading and
// re-applying.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "deploy/cohort_outcomes.h"
#include "policy/policy.h"
#include "server/rollout/rollout_cache.h"
#include "server/rollout/rollout_metrics.h"
#include "store/store.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::server {

struct RolloutDependencies {
  store::FleetStore* store = nullptr;
  RolloutCache* cache = nullptr;
  RolloutMetrics* metrics = nullptr;  // optional
  std::function<std::shared_ptr<const policy::Policy>()> policy;
  std::function<absl::Time()> now;
  // How long after its stage opened a member no shaped resolve reached is
  // `unreached` (deploy::ReachTimeout of the intervals devices are told).
  absl::Duration reach_timeout = deploy::kDefaultReachTimeout;
  // Optional: told of each automatic step (advance, pause, roll back,
  // complete) this replica stored, as an audit event without its replica.
  // Only the replica whose compare-and-swap won is told, so a step taken
  // while several replicas reconcile is recorded once.
  std::function<void(v1::AuditEvent)> audit;
};

// How many times a transition re-reads after ABORTED before giving up.
inline constexpr int kMaxRevisionRetries = 5;

class RolloutAdmin {
 public:
  explicit RolloutAdmin(RolloutDependencies dependencies) : deps_(std::move(dependencies)) {}

  // INVALID_ARGUMENT naming the field; ALREADY_EXISTS naming the id.
  absl::StatusOr<v1::Rollout> Create(const v1::Rollout& spec);
  // NOT_FOUND naming the id (INVALID_ARGUMENT for an empty one).
  absl::StatusOr<v1::Rollout> Get(const std::string& id);
  absl::StatusOr<std::vector<v1::Rollout>> List();
  // FAILED_PRECONDITION naming the state (or the breached gate, for advance).
  absl::StatusOr<v1::Rollout> Pause(const std::string& id, const std::string& reason);
  absl::StatusOr<v1::Rollout> Resume(const std::string& id, const std::string& reason);
  absl::StatusOr<v1::Rollout> Advance(const std::string& id, const std::string& reason);
  // One page of the rollout's members with where each stands
  // (deploy::StandingOf). INVALID_ARGUMENT naming the field for an unknown
  // standing, a page_size over 1000 or a page_token that is not a device id
  // this call could have given; NOT_FOUND naming the id.
  absl::StatusOr<v1::ListRolloutDevicesResponse> ListDevices(
      const v1::ListRolloutDevicesRequest& request);
  absl::StatusOr<v1::Rollout> Abort(const std::string& id, const std::string& reason);
  // Replaces the spec of the rollout `spec.id` names (deploy::UpdateRolloutSpec):
  // INVALID_ARGUMENT naming the field for a bad spec or a server-set field;
  // NOT_FOUND naming rollout.id; FAILED_PRECONDITION naming the state of a
  // finished rollout, or the field that cannot change while it runs.
  absl::StatusOr<v1::Rollout> Update(const v1::Rollout& spec);
  // Deletes a finished (COMPLETED, ABORTED or ROLLED_BACK) rollout, so its
  // id can be used again; its outcomes stay in the store. Returns the
  // rollout as it was. FAILED_PRECONDITION naming the state otherwise.
  // `checked_state`: the state the caller judged the deletion on (e.g. how
  // many devices it moves back); ABORTED when the rollout has left it since,
  // so a rollout that completed meanwhile is not deleted unchecked.
  absl::StatusOr<v1::Rollout> Delete(const std::string& id,
                                     std::optional<v1::RolloutState> checked_state = std::nullopt);

 private:
  using Transition = std::function<absl::StatusOr<v1::Rollout>(const v1::Rollout&)>;
  // Read, transform, compare-and-swap; again from the read on ABORTED.
  absl::StatusOr<v1::Rollout> Transact(const std::string& id, const Transition& transition);

  // Fills rollout.stage_plans from the fleet as it is now: how many
  // devices the selector matches, and their engine failure rate.
  absl::Status AttachPlans(v1::Rollout* rollout);

  RolloutDependencies deps_;
};

}  // namespace weightpath::server
