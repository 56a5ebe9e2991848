#include "ctl/rollout_plan.h"

#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/control_characters.h"
#include "ctl/table_writer.h"

namespace weightpath::ctl {

uint64_t MovedDevices(const v1::PlanPolicyResponse& plan) {
  uint64_t moved = 0;
  for (const v1::PlanPolicyResponse::Move& move : plan.moves()) moved += move.devices();
  return moved;
}

std::string MoveCountLine(const v1::PlanPolicyResponse& plan, absl::string_view verb) {
  std::string line = absl::StrCat(MovedDevices(plan), " of ", plan.devices_evaluated(),
                                  plan.devices_evaluated() == 1 ? " device " : " devices ", verb);
  if (plan.devices_without_profile() > 0) {
    absl::StrAppend(&line, " (", plan.devices_without_profile(),
                    " not evaluated: no profile kept, or one the served policy refuses)");
  }
  return line;
}

void WriteMoveTable(const v1::PlanPolicyResponse& plan, absl::string_view indent,
                    std::ostream& out) {
  if (plan.moves().empty()) return;
  TableWriter table({"CLASS", "FROM", "TO", "DEVICES", "EXAMPLES"});
  for (const v1::PlanPolicyResponse::Move& move : plan.moves()) {
    std::vector<std::string> examples;
    for (const std::string& id : move.example_device_ids()) examples.push_back(ControlEscaped(id));
    table.AddRow({move.hardware_class(), move.from_path(),
                  move.to_path().empty() ? absl::StrCat("refused: ", ControlEscaped(move.reason()))
                                         : move.to_path(),
                  absl::StrCat(move.devices()), absl::StrJoin(examples, ", ")});
  }
  std::ostringstream text;
  table.Write(text);
  std::istringstream lines(text.str());
  for (std::string line; std::getline(lines, line);) out << indent << line << "\n";
}

}  // namespace weightpath::ctl
