// What FleetAdmin answers about the fleet: the device registry, the counts
// by class x path, the verification matrix, and the audit trail. Independent of gRPC and of
// who is asking (FleetAdminService checks the operator first).
#pragma once

#include "absl/status/statusor.h"
#include "server/fleet/fleet_state.h"
#include "weightpath/v1/fleet.pb.h"

namespace weightpath::server {

// The most a ListAuditEvents page holds: 10,000 events can come to ~26 MB (a
// 1 KiB summary and message each), past gRPC's default 4 MiB receive limit in
// every client; 3 MiB leaves room for the rest of the answer.
inline constexpr size_t kMaxAuditPageBytes = 3 * 1024 * 1024;

class FleetQueries {
 public:
  explicit FleetQueries(FleetState* fleet) : fleet_(fleet) {}

  // INVALID_ARGUMENT naming hardware_class (not one the policy library
  // knows), label_selector, page_size or page_token.
  absl::StatusOr<v1::ListDevicesResponse> ListDevices(const v1::ListDevicesRequest& request);
  // INVALID_ARGUMENT for an empty device_id; NOT_FOUND naming it.
  absl::StatusOr<v1::Device> GetDevice(const v1::GetDeviceRequest& request);
  // Without seen_since: every device ever recorded.
  absl::StatusOr<v1::FleetSummaryResponse> FleetSummary(const v1::FleetSummaryRequest& request);
  // The fleet's cells and the policy-verified paths no device reported
  // (store::AddPolicyVerifiedCells).
  absl::StatusOr<v1::GetVerificationMatrixResponse> VerificationMatrix();

  // Oldest first; limit 0 is the default (1000), above 10000 INVALID_ARGUMENT
  // naming limit, and since INVALID_ARGUMENT naming since when not a time.
  // A page stops at kMaxAuditPageBytes of events; next_page_token then names
  // the older ones (page_token INVALID_ARGUMENT when it is not such a token).
  absl::StatusOr<v1::ListAuditEventsResponse> ListAuditEvents(
      const v1::ListAuditEventsRequest& request);
  // Commits one audited call (FleetState::RecordAuditEvent).
  absl::Status RecordAuditEvent(const v1::AuditEvent& event);

  // The store and the policy served now, for the queries that evaluate the
  // registry against a policy (PlanPolicy, server/api/policy_plan.h).
  FleetState& state() { return *fleet_; }

 private:
  FleetState* const fleet_;
};

}  // namespace weightpath::server
