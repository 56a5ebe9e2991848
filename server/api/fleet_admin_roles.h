// The one table of which role each FleetAdmin RPC needs. Admit
// (fleet_admin_service.cc) consults it for every call, and a test walks the
// service descriptor so that an RPC added to the proto without a row here
// fails the build's tests instead of being served to anyone.
#pragma once

#include <optional>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/security/operator_auth.h"

namespace weightpath::server {

struct FleetAdminMethodRole {
  absl::string_view method;  // the RPC's name in weightpath.v1.FleetAdmin
  Role needs;
};

absl::Span<const FleetAdminMethodRole> FleetAdminMethodRoles();

// nullopt for a name the table does not hold.
std::optional<Role> RoleNeededFor(absl::string_view method);

}  // namespace weightpath::server
