#include "ctl/rollout_view.h"

#include <cstdio>
#include <sstream>

#include "common/control_characters.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "deploy/label_selector.h"
#include "common/proto_time.h"
#include "ctl/table_writer.h"
#include "ctl/view_output.h"
#include "deploy/rollout_evaluation.h"
#include "deploy/stage_plan.h"
#include "google/protobuf/util/json_util.h"

namespace weightpath::ctl {
namespace {

std::string StateName(v1::RolloutState state) {
  std::string name = v1::RolloutState_Name(state);
  constexpr absl::string_view kPrefix = "ROLLOUT_STATE_";
  if (absl::StartsWith(name, kPrefix)) name = name.substr(kPrefix.size());
  return name;
}

std::string DescribeAction(const v1::RolloutAction& action) {
  switch (action.action_case()) {
    case v1::RolloutAction::kSetPriority:
      return absl::StrCat("set priority ", v1::Priority_Name(action.set_priority()));
    case v1::RolloutAction::kPinPath:
      return absl::StrCat("pin path ", action.pin_path());
    case v1::RolloutAction::kPinArtifact: {
      const v1::Artifact& artifact = action.pin_artifact().artifact();
      // A pin by target path alone is the signed catalog's build of it.
      const std::string build = artifact.uri().empty()
                                    ? absl::StrCat("signed target ", artifact.target_path())
                                    : artifact.uri();
      return absl::StrCat("pin artifact of ", action.pin_artifact().path(), " to ", build,
                          artifact.version().empty() ? ""
                                                     : absl::StrCat(" (", artifact.version(), ")"));
    }
    case v1::RolloutAction::ACTION_NOT_SET:
      break;
  }
  return "none";
}

std::string DescribeSelector(const v1::DeviceSelector& selector) {
  if (selector.all()) return "all devices";
  std::string text = deploy::FormatLabelSelector(selector);
  if (text.empty()) text = "(no label requirement)";
  if (selector.hardware_classes_size() > 0) {
    absl::StrAppend(&text, "  hardware classes: ", absl::StrJoin(selector.hardware_classes(), ","));
  }
  return text;
}

std::string Percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "-";
  return absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

void AppendOutcomeRow(std::string* out, absl::string_view name, uint64_t members, uint64_t control) {
  absl::StrAppend(out, absl::StrFormat("    %-18s %10d %10d\n", name, members, control));
}

// The server sets a reason at every evaluation and clears it on create, so
// a progressing rollout without one has no counts yet, not zeros.
bool NotEvaluatedYet(const v1::Rollout& rollout) {
  return rollout.state() == v1::ROLLOUT_STATE_PROGRESSING && rollout.state_reason().empty();
}

}  // namespace

std::string RolloutStateName(v1::RolloutState state) { return StateName(state); }

std::string FormatRolloutProgress(const v1::Rollout& rollout) {
  std::string out;
  // The id, reason and description are other operators' words.
  absl::StrAppend(&out, "rollout ", ControlEscaped(rollout.id()), ": ", StateName(rollout.state()));
  if (!rollout.state_reason().empty()) {
    absl::StrAppend(&out, " (", ControlEscaped(rollout.state_reason()), ")");
  }
  absl::StrAppend(&out, "\n");
  if (!rollout.description().empty()) {
    absl::StrAppend(&out, "  ", ControlEscaped(rollout.description()), "\n");
  }
  absl::StrAppend(&out, "  selector:  ", DescribeSelector(rollout.selector()), "\n");
  absl::StrAppend(&out, "  action:    ", DescribeAction(rollout.action()),
                  "  (precedence ", rollout.precedence(), ")\n");

  const int stage_count = rollout.stages_size();
  if (stage_count > 0) {
    const uint32_t index = std::min<uint32_t>(rollout.current_stage(), stage_count - 1);
    const v1::RolloutStage& stage = rollout.stages(index);
    std::vector<std::string> plan;
    for (const v1::RolloutStage& each : rollout.stages()) plan.push_back(absl::StrCat(each.percent(), "%"));
    absl::StrAppend(&out, "  stage:     ", index + 1, " of ", stage_count, " at ", stage.percent(),
                    "% of the selector  [", absl::StrJoin(plan, " -> "), "]\n");
    absl::StrAppend(&out, "             bake ", FormatSeconds(absl::Seconds(stage.min_bake_seconds())),
                    ", needs ", stage.min_reporting_devices(), " reporting, silent after ",
                    FormatSeconds(absl::Seconds(stage.report_timeout_seconds())));
    if (rollout.has_stage_started_at()) {
      absl::StrAppend(&out, ", started ",
                      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                                       FromProtoTime(rollout.stage_started_at()),
                                       absl::UTCTimeZone()));
    }
    absl::StrAppend(&out, "\n");
    if (rollout.has_stage_horizon()) {
      absl::StrAppend(&out, "             horizon ",
                      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromProtoTime(rollout.stage_horizon()),
                                       absl::UTCTimeZone()),
                      deploy::AdvancesAtHorizon(rollout) ? " (advances there with no failed gate)"
                                                         : " (advances only on a pass: on_pass)",
                      "\n");
    }
  }
  if (rollout.stage_plans_size() > 0) {
    absl::StrAppend(&out, "  planned power (engine gate, 80% by the horizon):\n");
    for (const v1::StagePlan& plan : rollout.stage_plans()) {
      absl::StrAppend(&out, "    ", deploy::DescribeStagePlan(plan), "\n");
    }
  }

  if (NotEvaluatedYet(rollout)) {
    absl::StrAppend(&out, "  members:   not evaluated yet\n  control:   not evaluated yet\n",
                    "  gates:     not evaluated yet\n");
    return out;
  }
  const v1::CohortOutcomes& members = rollout.members();
  const v1::CohortOutcomes& control = rollout.control();
  // The counts the gates read: the stage's own members, and control
  // reports since it opened (deploy/README.md, "Each stage is judged on its
  // own devices").
  const uint32_t shown_stage =
      std::min<uint32_t>(rollout.current_stage(), std::max(1, stage_count) - 1) + 1;
  absl::StrAppend(&out, "  members:   ", Counted(members.devices(), "device", "devices"), ", ",
                  members.reporting(), " reporting (",
                  Percent(members.reporting(), members.devices()), ") admitted by stage ",
                  shown_stage, "\n");
  if (rollout.has_all_members()) {
    const v1::CohortOutcomes& all = rollout.all_members();
    absl::StrAppend(&out, "  all stages: ", Counted(all.devices(), "member", "members"), ": ",
                    all.engine_started(), " engine_started, ",
                    all.boot_failed() + all.artifact_failed() + all.engine_failed(), " failed, ",
                    all.silent(), " silent, ", all.unreached(), " unreached\n");
  }
  absl::StrAppend(&out, "  control:   ", Counted(control.devices(), "device", "devices"), ", ",
                  control.reporting(), " reporting since the stage opened\n");
  if (rollout.state() == v1::ROLLOUT_STATE_COMPLETED && rollout.has_completed_at()) {
    absl::StrAppend(&out, "  after completion: ",
                    Counted(rollout.failures_after_completion(), "member", "members"),
                    " failed since ",
                    absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromProtoTime(rollout.completed_at()),
                                     absl::UTCTimeZone()),
                    " (watched for ",
                    FormatSeconds(deploy::WatchAfterCompletion(rollout)), ")\n");
  }
  absl::StrAppend(&out, absl::StrFormat("  outcomes:  %-18s %10s %10s\n", "", "members", "control"));
  AppendOutcomeRow(&out, "engine_started", members.engine_started(), control.engine_started());
  AppendOutcomeRow(&out, "boot_failed", members.boot_failed(), control.boot_failed());
  AppendOutcomeRow(&out, "artifact_failed", members.artifact_failed(), control.artifact_failed());
  AppendOutcomeRow(&out, "engine_failed", members.engine_failed(), control.engine_failed());
  AppendOutcomeRow(&out, "silent", members.silent(), control.silent());
  // Never read by a gate: the device's disk was full, the build never ran.
  AppendOutcomeRow(&out, "cache_full", members.cache_full(), control.cache_full());
  // Never told (no shaped resolve within the reach timeout): not silent.
  AppendOutcomeRow(&out, "unreached", members.unreached(), control.unreached());
  AppendOutcomeRow(&out, "tasks_completed", members.tasks_completed(), control.tasks_completed());
  AppendOutcomeRow(&out, "tasks_undone", members.tasks_undone(), control.tasks_undone());
  AppendOutcomeRow(&out, "tasks_failed", members.tasks_failed(), control.tasks_failed());
  absl::StrAppend(&out, "  gates:\n");
  for (const deploy::GateReading& reading : deploy::ReadGates(rollout.gates(), members, control)) {
    absl::StrAppend(&out, "    ", deploy::DescribeGate(reading),
                    reading.breached ? "  BREACHED" : "", "\n");
  }
  if (rollout.gates().rollback_on_breach()) absl::StrAppend(&out, "    (a breach rolls back)\n");
  if (rollout.sequential_gates_size() > 0) {
    absl::StrAppend(&out, "  sequential gates (an e-value at the threshold decides):\n");
    for (const v1::SequentialGateStatus& gate : rollout.sequential_gates()) {
      absl::StrAppend(&out,
                      absl::StrFormat("    %-8s %-12s fail e %.3g, pass e %.3g, threshold %.3g",
                                      gate.gate(), gate.verdict(), gate.fail_e_value(),
                                      gate.pass_e_value(), gate.threshold()));
      if (!gate.inconclusive_reason().empty()) {
        absl::StrAppend(&out, ": ", gate.inconclusive_reason());
      }
      absl::StrAppend(&out, "\n");
      for (const v1::SequentialGateClass& each : gate.classes()) {
        absl::StrAppend(
            &out, absl::StrFormat("      %-14s members %d/%d failed, control %d/%d\n",
                                  each.hardware_class(), each.member_failures(),
                                  each.member_trials(), each.control_failures(),
                                  each.control_trials()));
      }
    }
  }
  return out;
}

std::string FormatRolloutList(const std::vector<v1::Rollout>& rollouts) {
  if (rollouts.empty()) return "no rollouts\n";
  std::string out = absl::StrFormat("%-24s %-12s %-8s %-8s %-17s %s\n", "ID", "STATE", "STAGE",
                                    "PERCENT", "MEMBERS", "ACTION");
  for (const v1::Rollout& rollout : rollouts) {
    const int stage_count = rollout.stages_size();
    const uint32_t index =
        stage_count == 0 ? 0 : std::min<uint32_t>(rollout.current_stage(), stage_count - 1);
    const std::string stage = absl::StrCat(index + 1, " of ", stage_count);
    const std::string percent =
        stage_count == 0 ? "-" : absl::StrCat(rollout.stages(index).percent(), "%");
    const std::string members = NotEvaluatedYet(rollout)
                                    ? "not evaluated yet"
                                    : absl::StrCat(rollout.members().devices());
    absl::StrAppend(&out, absl::StrFormat("%-24s %-12s %-8s %-8s %-17s %s\n", rollout.id(),
                                          StateName(rollout.state()), stage, percent, members,
                                          DescribeAction(rollout.action())));
  }
  return out;
}

std::string FormatGateTable(const v1::Rollout& rollout) {
  if (NotEvaluatedYet(rollout)) return "not evaluated yet\n";
  TableWriter table({"GATE", "VERDICT", "STATISTIC", "CLASS", "MEMBERS", "CONTROL"});
  for (const deploy::GateReading& reading :
       deploy::ReadGates(rollout.gates(), rollout.members(), rollout.control())) {
    table.AddRow({absl::StrCat(reading.gate, " delta"), reading.breached ? "breached" : "within",
                  absl::StrFormat("failure rate %.3f vs %.3f, max delta %.3f", reading.member_rate,
                                  reading.control_rate, reading.max_delta),
                  "all"});
  }
  for (const v1::SequentialGateStatus& gate : rollout.sequential_gates()) {
    const std::string verdict =
        gate.inconclusive_reason().empty()
            ? gate.verdict()
            : absl::StrCat(gate.verdict(), " (", gate.inconclusive_reason(), ")");
    // The gate's own figures: the classes' mean fail evidence, the weakest
    // class's pass evidence.
    table.AddRow({absl::StrCat(gate.gate(), " sequential"), verdict,
                  absl::StrFormat("e-value fail %.3g, pass %.3g, threshold %.3g",
                                  gate.fail_e_value(), gate.pass_e_value(), gate.threshold()),
                  "all"});
    for (const v1::SequentialGateClass& each : gate.classes()) {
      table.AddRow({"", "",
                    absl::StrFormat("e-value fail %.3g, pass %.3g", each.fail_e_value(),
                                    each.pass_e_value()),
                    each.hardware_class(),
                    absl::StrCat(each.member_failures(), "/", each.member_trials(), " failed"),
                    absl::StrCat(each.control_failures(), "/", each.control_trials(), " failed")});
    }
  }
  std::ostringstream out;
  table.Write(out);
  return out.str();
}

}  // namespace weightpath::ctl
