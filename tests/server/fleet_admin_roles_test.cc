// The FleetAdmin role table covers the service exactly: every RPC of the
// descriptor has a row (a new RPC cannot be served without one) and every
// row names an RPC; reads are the viewer's, rollout actions the operator's.
#include "server/api/fleet_admin_roles.h"

#include <set>
#include <string>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "weightpath/v1/fleet_admin.grpc.pb.h"
#include "weightpath/v1/fleet_admin.pb.h"

namespace weightpath::server {
namespace {

const google::protobuf::ServiceDescriptor& FleetAdminDescriptor() {
  // fleet_admin.proto defines only the service, so nothing else pulls its
  // generated object into the link; naming its descriptor table does, and
  // the file then registers itself in the generated pool.
  static const void* volatile linked = &descriptor_table_weightpath_2fv1_2ffleet_5fadmin_2eproto;
  EXPECT_NE(linked, nullptr);
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::FleetAdmin::service_full_name());
  EXPECT_NE(service, nullptr);
  return *service;
}

TEST(FleetAdminRolesTest, EveryRpcOfTheServiceHasExactlyOneRow) {
  const google::protobuf::ServiceDescriptor& service = FleetAdminDescriptor();
  std::set<std::string> rows;
  for (const FleetAdminMethodRole& row : FleetAdminMethodRoles()) {
    EXPECT_TRUE(rows.insert(std::string(row.method)).second) << row.method << " listed twice";
    EXPECT_NE(service.FindMethodByName(std::string(row.method)), nullptr)
        << row.method << " is not an RPC of " << service.full_name();
  }
  for (int i = 0; i < service.method_count(); ++i) {
    const std::string& method = service.method(i)->name();
    EXPECT_TRUE(RoleNeededFor(method).has_value())
        << service.full_name() << "." << method
        << " has no row in server/api/fleet_admin_roles.cc: say which role may call it";
  }
}

TEST(FleetAdminRolesTest, ReadsAreTheViewersAndRolloutActionsTheOperators) {
  for (const char* read : {"ListDevices", "GetDevice", "FleetSummary", "GetVerificationMatrix",
                           "GetRollout", "ListRollouts", "ExplainDecision"}) {
    EXPECT_EQ(RoleNeededFor(read), Role::kViewer) << read;
  }
  for (const char* action : {"CreateRollout", "PauseRollout", "ResumeRollout", "AdvanceRollout",
                             "AbortRollout", "UpdateRollout", "DeleteRollout"}) {
    EXPECT_EQ(RoleNeededFor(action), Role::kOperator) << action;
  }
  EXPECT_FALSE(RoleNeededFor("NoSuchRpc").has_value());
}

TEST(FleetAdminRolesTest, RolesAreOrderedAndNamed) {
  EXPECT_LT(Role::kViewer, Role::kOperator);
  EXPECT_LT(Role::kOperator, Role::kAdmin);
  for (Role role : {Role::kViewer, Role::kOperator, Role::kAdmin}) {
    EXPECT_EQ(ParseRole(RoleName(role)), role);
  }
  EXPECT_FALSE(ParseRole("root").has_value());
}

}  // namespace
}  // namespace weightpath::server
