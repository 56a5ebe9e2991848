// `weightpathctl rollout status ID --devices`: one row per member of a
// rollout (FleetAdmin.ListRolloutDevices), with the stage that admitted it,
// its first resolve the rollout shaped, its last report, outcome and detail.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/command_line.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::ctl {

// The --devices filters, each a member standing (deploy::MemberStandingName):
// --silent, --failed, --rolled-back, --unreached, --pending.
std::vector<FlagSpec> RolloutDeviceFlags();

// The request the flags ask for: the standings set, --page-size (1..1000;
// INVALID_ARGUMENT naming the flag otherwise) and --page-token.
absl::StatusOr<v1::ListRolloutDevicesRequest> RolloutDevicesRequest(const std::string& id,
                                                                    const ParsedArguments& arguments);

// The table, then "N of M members shown" and, when there are more, the
// --page-token for the next page.
std::string FormatRolloutDevices(const v1::ListRolloutDevicesResponse& response);

}  // namespace weightpath::ctl
