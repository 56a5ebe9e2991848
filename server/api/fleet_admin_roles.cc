#include "server/api/fleet_admin_roles.h"

namespace weightpath::server {

absl::Span<const FleetAdminMethodRole> FleetAdminMethodRoles() {
  // Reads are the viewer's, the audit trail included (it holds what was
  // done, never a credential); steering a rollout is the operator's;
  // anything that changes what devices are served outside a rollout is the
  // admin's. Every RPC above the viewer's role is audited
  // (fleet_admin_service.h), so a row here is all a new mutating RPC needs.
  static constexpr FleetAdminMethodRole kRoles[] = {
      {"ListDevices", Role::kViewer},
      {"GetDevice", Role::kViewer},
      {"FleetSummary", Role::kViewer},
      {"GetVerificationMatrix", Role::kViewer},
      {"GetRollout", Role::kViewer},
      {"ListRollouts", Role::kViewer},
      {"ListRolloutDevices", Role::kViewer},
      {"ExplainDecision", Role::kViewer},
      {"PlanPolicy", Role::kViewer},
      {"PlanRollout", Role::kViewer},
      {"ListAuditEvents", Role::kViewer},
      {"CreateRollout", Role::kOperator},
      {"PauseRollout", Role::kOperator},
      {"ResumeRollout", Role::kOperator},
      {"AdvanceRollout", Role::kOperator},
      {"AbortRollout", Role::kOperator},
      {"UpdateRollout", Role::kOperator},
      {"DeleteRollout", Role::kOperator},
  };
  return kRoles;
}

std::optional<Role> RoleNeededFor(absl::string_view method) {
  for (const FleetAdminMethodRole& row : FleetAdminMethodRoles()) {
    if (row.method == method) return row.needs;
  }
  return std::nullopt;
}

}  // namespace weightpath::server
