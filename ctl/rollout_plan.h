// What a plan (PlanPolicy, PlanRollout, a deletion) says in a table: the
// devices that would move, by hardware class, from which path to which,
// with example device ids. Shared by policy plan, apply --dry-run, apply
// --prune and rollout delete.
#pragma once

#include <ostream>
#include <string>
#include "absl/strings/string_view.h"

#include "weightpath/v1/fleet.pb.h"

namespace weightpath::ctl {

// The devices the plan's rows move, all rows together.
uint64_t MovedDevices(const v1::PlanPolicyResponse& plan);

// "2 of 4 devices would move" (or `verb` for "would move"), with the
// devices not evaluated when there are any.
std::string MoveCountLine(const v1::PlanPolicyResponse& plan, absl::string_view verb);

// The CLASS FROM TO DEVICES EXAMPLES table, each line after `indent`;
// nothing when no device moves.
void WriteMoveTable(const v1::PlanPolicyResponse& plan, absl::string_view indent,
                    std::ostream& out);

}  // namespace weightpath::ctl
