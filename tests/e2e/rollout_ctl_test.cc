// weightpathctl rollout's client side: rollout.yaml parsing (with its
// unknown-key errors) and the progress view, without a server.
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "ctl/command.h"
#include "ctl/command_table.h"
#include "ctl/rollout_view.h"
#include "ctl/view_output.h"
#include "ctl/rollout_yaml.h"
#include "deploy/rollout_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::ctl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

std::string ReadExample() {
  std::ifstream in(WEIGHTPATH_ROLLOUT_EXAMPLE);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(CtlRolloutYamlTest, TheExampleIsAValidAgenticFidelityRollout) {
  absl::StatusOr<v1::Rollout> rollout = ParseRolloutYaml(ReadExample(), "example.yaml");
  ASSERT_THAT(rollout.status(), IsOk());
  EXPECT_EQ(rollout->id(), "agentic-fidelity");
  EXPECT_EQ(rollout->selector().match_labels().at("workload"), "agentic");
  EXPECT_EQ(rollout->action().set_priority(), v1::PRIORITY_FIDELITY);
  ASSERT_EQ(rollout->stages_size(), 4);
  EXPECT_EQ(rollout->stages(0).percent(), 1u);
  EXPECT_EQ(rollout->stages(1).percent(), 10u);
  EXPECT_EQ(rollout->stages(2).percent(), 50u);
  EXPECT_EQ(rollout->stages(3).percent(), 100u);
  EXPECT_DOUBLE_EQ(rollout->gates().max_task_failure_delta(), 0.05);
  EXPECT_THAT(deploy::ValidateRollout(*rollout, *policy::DefaultPolicy()), IsOk());
}

TEST(CtlRolloutYamlTest, UnknownKeyIsNamedWithItsPathAndLine) {
  const std::string yaml =
      "id: x\n"
      "stages:\n"
      "  - percent: 100\n"
      "    bake_minutes: 5\n";
  EXPECT_THAT(ParseRolloutYaml(yaml, "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("r.yaml:4:5: rollout.stages[0].bake_minutes: unknown key 'bake_minutes' (allowed: percent, ")));
  EXPECT_THAT(ParseRolloutYaml("id: x\nselektor: {}\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("r.yaml:2:1: rollout.selektor: unknown key 'selektor' (allowed: id, ")));
}

TEST(CtlRolloutYamlTest, FieldsTheServerSetsAreRefusedSayingSoAndAreNotListedAsKeys) {
  for (const char* key : {"state: ROLLOUT_STATE_COMPLETED", "current_stage: 2", "members: {}",
                          "control: {}", "created_at: \"2026-01-01T00:00:00Z\"",
                          "stage_started_at: \"2026-01-01T00:00:00Z\"", "state_reason: x",
                          "sequential_gates: []", "stage_entered_at: []", "currentStage: 1",
                          "all_members: {}", "completed_at: \"2026-01-01T00:00:00Z\"",
                          "failures_after_completion: 1", "stage_plans: []",
                          "stage_horizon: \"2026-01-01T00:00:00Z\""}) {
    EXPECT_THAT(ParseRolloutYaml(absl::StrCat("id: x\n", key, "\n"), "r.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("r.yaml:2:"), HasSubstr("is set by the server"))))
        << key;
  }
  absl::StatusOr<v1::Rollout> typo = ParseRolloutYaml("id: x\nstaet: 1\n", "r.yaml");
  EXPECT_THAT(typo.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(allowed: id, description, selector, action, stages, gates, "
                                 "precedence, watch_after_completion_seconds, "
                                 "stage_resolve_interval_seconds)")));
}

TEST(CtlRolloutYamlTest, LabelKeysAreFreeAndTheirValuesStayStrings) {
  absl::StatusOr<v1::Rollout> rollout = ParseRolloutYaml(
      "id: x\nselector:\n  match_labels:\n    tier: 2\n    any-key: yes\n", "r.yaml");
  ASSERT_THAT(rollout.status(), IsOk());
  EXPECT_EQ(rollout->selector().match_labels().at("tier"), "2");
  EXPECT_EQ(rollout->selector().match_labels().at("any-key"), "yes");
}

TEST(CtlRolloutYamlTest, JsonNamesAndEnumNamesAreAccepted) {
  absl::StatusOr<v1::Rollout> rollout = ParseRolloutYaml(
      "id: x\nselector:\n  matchExpressions:\n    - key: workload\n      operator: OPERATOR_IN\n"
      "      values: [agentic, batch]\naction:\n  pinPath: w4a8-amx\n",
      "r.yaml");
  ASSERT_THAT(rollout.status(), IsOk());
  ASSERT_EQ(rollout->selector().match_expressions_size(), 1);
  EXPECT_EQ(rollout->selector().match_expressions(0).operator_(), v1::LabelRequirement::OPERATOR_IN);
  EXPECT_EQ(rollout->action().pin_path(), "w4a8-amx");
}

TEST(CtlRolloutYamlTest, EnumValuesTakeTheAgentConfigsSpellingsInAnyCase) {
  for (const char* spelling : {"FIDELITY", "fidelity", "Fidelity", "PRIORITY_FIDELITY",
                               "priority_fidelity"}) {
    absl::StatusOr<v1::Rollout> rollout = ParseRolloutYaml(
        absl::StrCat("id: x\naction:\n  set_priority: ", spelling, "\n"), "r.yaml");
    ASSERT_THAT(rollout.status(), IsOk()) << spelling;
    EXPECT_EQ(rollout->action().set_priority(), v1::PRIORITY_FIDELITY) << spelling;
  }
  // The Kubernetes selector spellings.
  absl::StatusOr<v1::Rollout> rollout = ParseRolloutYaml(
      "id: x\nselector:\n  match_expressions:\n    - {key: a, operator: NotIn, values: [b]}\n"
      "    - {key: c, operator: DoesNotExist}\n    - {key: d, operator: in, values: [e]}\n",
      "r.yaml");
  ASSERT_THAT(rollout.status(), IsOk());
  EXPECT_EQ(rollout->selector().match_expressions(0).operator_(),
            v1::LabelRequirement::OPERATOR_NOT_IN);
  EXPECT_EQ(rollout->selector().match_expressions(1).operator_(),
            v1::LabelRequirement::OPERATOR_DOES_NOT_EXIST);
  EXPECT_EQ(rollout->selector().match_expressions(2).operator_(),
            v1::LabelRequirement::OPERATOR_IN);
}

TEST(CtlRolloutYamlTest, AValueOfTheWrongKindIsNamedAtItsLineWithTheAcceptedValues) {
  EXPECT_THAT(ParseRolloutYaml("id: x\naction:\n  set_priority: FIDELTY\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("r.yaml:3:17: rollout.action.set_priority: 'FIDELTY' is "
                                       "not a Priority; accepted: speed, fidelity (any case, or "
                                       "PRIORITY_SPEED, PRIORITY_FIDELITY)"),
                             ::testing::Not(HasSubstr("type.googleapis.com")))));
  // "unset" is no choice an operator makes.
  EXPECT_THAT(ParseRolloutYaml("id: x\naction: {set_priority: PRIORITY_UNSPECIFIED}\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("r.yaml:2:")));
  EXPECT_THAT(ParseRolloutYaml("id: x\nstages:\n  - percent: lots\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("r.yaml:3:14: rollout.stages[0].percent: expected an integer "
                                 "from 0 to 4294967295, got 'lots'")));
  EXPECT_THAT(ParseRolloutYaml("id: x\nstages:\n  - percent: -5\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("r.yaml:3:14:")));
  EXPECT_THAT(ParseRolloutYaml("id: x\ngates: {max_task_failure_delta: high}\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("r.yaml:2:33: rollout.gates.max_task_failure_delta: expected a "
                                 "finite number")));
  EXPECT_THAT(ParseRolloutYaml("id: x\ngates: {rollback_on_breach: yes}\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("r.yaml:2:29:")));
  // A version that YAML reads as a number is the text written.
  absl::StatusOr<v1::Rollout> pinned = ParseRolloutYaml(
      "id: x\naction:\n  pin_artifact:\n    path: w4a8-amx\n    artifact: {version: 2026.10, "
      "size_bytes: 12}\ngates: {max_boot_failure_delta: 0.123456789}\n",
      "r.yaml");
  ASSERT_THAT(pinned.status(), IsOk());
  EXPECT_EQ(pinned->action().pin_artifact().artifact().version(), "2026.10");
  EXPECT_EQ(pinned->action().pin_artifact().artifact().size_bytes(), 12u);
  EXPECT_DOUBLE_EQ(pinned->gates().max_boot_failure_delta(), 0.123456789);
}

TEST(CtlRolloutYamlTest, BadValuesAndBadDocumentsAreInvalidArgument) {
  EXPECT_THAT(ParseRolloutYaml("stages:\n  - percent: lots\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("r.yaml")));
  EXPECT_THAT(ParseRolloutYaml("- just\n- a list\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be a YAML map")));
  EXPECT_THAT(ParseRolloutYaml("id: [unclosed\n", "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid YAML")));
  // Aliases count as the text they repeat: 100 x 64 KiB is over the 1 MiB
  // a rollout file may come to.
  std::string bomb = "id: &big " + std::string(64 * 1024, 'r') + "\nlabels:\n";
  for (int i = 0; i < 100; ++i) bomb += "  k" + std::to_string(i) + ": *big\n";
  EXPECT_THAT(ParseRolloutYaml(bomb, "r.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bytes of text once aliases are expanded")));
}

v1::Rollout InProgress() {
  v1::Rollout rollout = *ParseRolloutYaml(ReadExample(), "example.yaml");
  rollout.set_state(v1::ROLLOUT_STATE_PAUSED);
  rollout.set_current_stage(1);
  rollout.set_state_reason(
      "stage 2 of 4: task gate: members 0.343 vs control 0.100, delta 0.243 > 0.050");
  rollout.mutable_members()->set_devices(40);
  rollout.mutable_members()->set_reporting(30);
  rollout.mutable_members()->set_engine_started(28);
  rollout.mutable_members()->set_engine_failed(2);
  rollout.mutable_members()->set_tasks_completed(65);
  rollout.mutable_members()->set_tasks_undone(30);
  rollout.mutable_members()->set_tasks_failed(5);
  rollout.mutable_control()->set_devices(360);
  rollout.mutable_control()->set_reporting(300);
  rollout.mutable_control()->set_engine_started(300);
  rollout.mutable_control()->set_tasks_completed(900);
  rollout.mutable_control()->set_tasks_undone(100);
  return rollout;
}

TEST(CtlRolloutViewTest, ProgressShowsStageMembersOutcomesGatesAndReason) {
  const std::string view = FormatRolloutProgress(InProgress());
  EXPECT_THAT(view, HasSubstr("rollout agentic-fidelity: PAUSED (stage 2 of 4: task gate"));
  EXPECT_THAT(view, HasSubstr("stage:     2 of 4 at 10% of the selector  [1% -> 10% -> 50% -> 100%]"));
  EXPECT_THAT(view, HasSubstr("members:   40 devices, 30 reporting (75.0%)"));
  EXPECT_THAT(view, HasSubstr("control:   360 devices, 300 reporting"));
  EXPECT_THAT(view, HasSubstr("engine_started             28        300"));
  EXPECT_THAT(view, HasSubstr("tasks_undone               30        100"));
  // (30 + 5) / 100 against 100 / 1000: 0.350 vs 0.100.
  EXPECT_THAT(view, HasSubstr("task gate: members 0.350 vs control 0.100"));
  EXPECT_THAT(view, HasSubstr("BREACHED"));
  EXPECT_THAT(view, HasSubstr("selector:  workload=agentic"));
  EXPECT_THAT(view, HasSubstr("action:    set priority PRIORITY_FIDELITY"));
}

TEST(CtlRolloutViewTest, BeforeTheFirstEvaluationCountsSayNotEvaluatedYetInsteadOfZeros) {
  v1::Rollout fresh = *ParseRolloutYaml(ReadExample(), "example.yaml");
  fresh.set_state(v1::ROLLOUT_STATE_PROGRESSING);
  const std::string view = FormatRolloutProgress(fresh);
  EXPECT_THAT(view, HasSubstr("stage:     1 of 4 at 1%"));
  EXPECT_THAT(view, HasSubstr("bake 30m 0s, needs 5 reporting, silent after 30m 0s"));
  EXPECT_THAT(view, HasSubstr("members:   not evaluated yet\n"));
  EXPECT_THAT(view, HasSubstr("gates:     not evaluated yet\n"));
  EXPECT_THAT(view, ::testing::Not(HasSubstr("0 devices")));
  // The list says so too, not "0" members.
  EXPECT_THAT(FormatRolloutList({fresh}), HasSubstr("1 of 4   1%       not evaluated yet"));
  fresh.set_state_reason("stage 1 of 4: baking, 30m 0s left");
  EXPECT_THAT(FormatRolloutProgress(fresh), HasSubstr("members:   0 devices, 0 reporting"));
}

TEST(CtlRolloutViewTest, ListHasOneLinePerRolloutAndJsonUsesProtoNames) {
  const std::string list = FormatRolloutList({InProgress()});
  EXPECT_THAT(list, HasSubstr("agentic-fidelity"));
  EXPECT_THAT(list, HasSubstr("PAUSED"));
  EXPECT_THAT(list, HasSubstr("2 of 4   10%      40 "));
  EXPECT_EQ(FormatRolloutList({}), "no rollouts\n");
  std::ostringstream json;
  ASSERT_THAT(WriteMessage(InProgress(), ViewOutput::kJson, json), IsOk());
  EXPECT_THAT(json.str(), HasSubstr("\"current_stage\": 1"));
  EXPECT_THAT(json.str(), HasSubstr("\"state\": \"ROLLOUT_STATE_PAUSED\""));
  std::ostringstream yaml;
  ASSERT_THAT(WriteMessage(InProgress(), ViewOutput::kYaml, yaml), IsOk());
  EXPECT_THAT(yaml.str(), HasSubstr("state: \"ROLLOUT_STATE_PAUSED\""));
}

int RunCtl(const std::vector<std::string>& args, std::string* out, std::string* err) {
  std::ostringstream out_stream;
  std::ostringstream err_stream;
  const int code = Dispatch(args, {out_stream, err_stream});
  *out = out_stream.str();
  *err = err_stream.str();
  return code;
}

TEST(CtlRolloutCommandTest, CommandLineErrorsExitWithUsageAndSayWhatIsWrong) {
  std::string out, err;
  EXPECT_EQ(RunCtl({"rollout", "frobnicate"}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("unknown action 'frobnicate'"));
  EXPECT_EQ(RunCtl({"rollout", "status", "--server", "127.0.0.1:1"}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("rollout status needs the rollout ID"));
  EXPECT_EQ(RunCtl({"rollout", "create", "--server", "127.0.0.1:1"}, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("-f FILE is required"));
  EXPECT_EQ(RunCtl({"rollout", "list", "--server", "127.0.0.1:1", "--cert", "c.pem"}, &out, &err),
            kExitUsage);
  EXPECT_THAT(err, HasSubstr("--cert comes without a key"));
  EXPECT_EQ(RunCtl({"rollout", "pause", "x", "--server", "127.0.0.1:1", "--bogus"}, &out, &err),
            kExitUsage);
  EXPECT_THAT(err, HasSubstr("bogus"));
}

TEST(CtlRolloutCommandTest, AnUnreachableServerIsAFailureNotAUsageError) {
  std::string out, err;
  EXPECT_EQ(RunCtl({"rollout", "list", "--server", "127.0.0.1:1", "--timeout", "2"}, &out, &err),
            kExitFailure);
  EXPECT_THAT(err, HasSubstr("ListRollouts"));
}

}  // namespace
}  // namespace weightpath::ctl
