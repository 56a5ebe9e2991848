#include "deploy/rollout_validation.h"

#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_fixtures.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::deploy {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weightpath::deploy::testing::Epoch;
using ::weightpath::deploy::testing::FidelityForAgentic;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

struct Fault {
  std::string name;
  std::function<void(v1::Rollout*)> break_it;
  std::string field;
};

std::vector<Fault> Faults() {
  return {
      {"EmptyId", [](v1::Rollout* r) { r->clear_id(); }, "rollout.id: must not be empty"},
      {"UppercaseId", [](v1::Rollout* r) { r->set_id("Fidelity"); }, "rollout.id: 'Fidelity'"},
      {"SlashInId", [](v1::Rollout* r) { r->set_id("a/b"); }, "rollout.id: 'a/b'"},
      {"IdEndsWithDash", [](v1::Rollout* r) { r->set_id("fidelity-"); }, "rollout.id"},
      {"LongId", [](v1::Rollout* r) { r->set_id(std::string(64, 'a')); },
       "rollout.id: '" + std::string(63, 'a') + " ...(+1 bytes)' is 64 bytes long; at most 63"},
      // The message quotes a bounded part of the id, so a refusal of a
      // 5,000-byte id stays small enough for any client's metadata limit.
      {"HugeId", [](v1::Rollout* r) { r->set_id(std::string(5000, 'a')); },
       "rollout.id: '" + std::string(63, 'a') + " ...(+4937 bytes)' is 5000 bytes long"},
      {"EmptySelectorWithoutAll", [](v1::Rollout* r) { r->clear_selector(); },
       "rollout.selector: is empty; set `all: true`"},
      {"BadSelectorKey",
       [](v1::Rollout* r) { (*r->mutable_selector()->mutable_match_labels())["a b"] = "x"; },
       "rollout.selector.match_labels[a b]"},
      {"UnknownHardwareClass",
       [](v1::Rollout* r) { r->mutable_selector()->add_hardware_classes("tpu"); },
       "rollout.selector.hardware_classes[0]"},
      {"NoAction", [](v1::Rollout* r) { r->clear_action(); },
       "rollout.action: must set one of set_priority, pin_path or pin_artifact"},
      {"UnspecifiedPriority",
       [](v1::Rollout* r) { r->mutable_action()->set_set_priority(v1::PRIORITY_UNSPECIFIED); },
       "rollout.action.set_priority"},
      {"UnknownPinPath", [](v1::Rollout* r) { r->mutable_action()->set_pin_path("w4a2-magic"); },
       "rollout.action.pin_path: unknown path id 'w4a2-magic'"},
      {"PinPathByNameNotId",
       [](v1::Rollout* r) { r->mutable_action()->set_pin_path("w4a16-tinygemm"); },
       "rollout.action.pin_path: unknown path id 'w4a16-tinygemm'"},
      {"UnknownPinArtifactPath",
       [](v1::Rollout* r) {
         auto* pinned = r->mutable_action()->mutable_pin_artifact();
         pinned->set_path("w4a16-tinygemm-x86");  // an id, not a name
         pinned->mutable_artifact()->set_uri("https://example.com/a");
         pinned->mutable_artifact()->set_sha256(std::string(64, 'a'));
       },
       "rollout.action.pin_artifact.path: unknown path name 'w4a16-tinygemm-x86'"},
      {"PinArtifactBadSha",
       [](v1::Rollout* r) {
         auto* pinned = r->mutable_action()->mutable_pin_artifact();
         pinned->set_path("w4a16-tinygemm");
         pinned->mutable_artifact()->set_uri("https://example.com/a");
         pinned->mutable_artifact()->set_sha256(std::string(64, 'A'));
       },
       "rollout.action.pin_artifact.artifact.sha256"},
      {"PinArtifactShortSha",
       [](v1::Rollout* r) {
         auto* pinned = r->mutable_action()->mutable_pin_artifact();
         pinned->set_path("w4a16-tinygemm");
         pinned->mutable_artifact()->set_uri("https://example.com/a");
         pinned->mutable_artifact()->set_sha256("abc123");
       },
       "rollout.action.pin_artifact.artifact.sha256: 'abc123'"},
      {"PinArtifactBadUri",
       [](v1::Rollout* r) {
         auto* pinned = r->mutable_action()->mutable_pin_artifact();
         pinned->set_path("w4a16-tinygemm");
         pinned->mutable_artifact()->set_uri("ftp://example.com/a");
         pinned->mutable_artifact()->set_sha256(std::string(64, 'a'));
       },
       "rollout.action.pin_artifact.artifact.uri"},
      {"PinByTargetPathBadSha",
       [](v1::Rollout* r) {
         auto* pinned = r->mutable_action()->mutable_pin_artifact();
         pinned->set_path("w4a16-tinygemm");
         pinned->mutable_artifact()->set_target_path("spark/w4a16-tinygemm-rc2.bin");
         pinned->mutable_artifact()->set_sha256("abc123");
       },
       "rollout.action.pin_artifact.artifact.sha256: 'abc123'"},
      {"PinListingFiles",
       [](v1::Rollout* r) {
         auto* pinned = r->mutable_action()->mutable_pin_artifact();
         pinned->set_path("w4a16-tinygemm");
         pinned->mutable_artifact()->set_target_path("spark/w4a16-tinygemm-rc2");
         pinned->mutable_artifact()->add_files()->set_path("config.json");
       },
       "rollout.action.pin_artifact.artifact.files: a directory build is pinned by its "
       "target_path alone"},
      {"PinWithNeitherUriNorTargetPath",
       [](v1::Rollout* r) {
         auto* pinned = r->mutable_action()->mutable_pin_artifact();
         pinned->set_path("w4a16-tinygemm");
         pinned->mutable_artifact()->set_sha256(std::string(64, 'a'));
       },
       "rollout.action.pin_artifact.artifact.uri: '' must start with https://, http:// or "
       "file:// (or give target_path alone"},
      {"NoStages", [](v1::Rollout* r) { r->clear_stages(); }, "rollout.stages: at least one"},
      {"ZeroPercent", [](v1::Rollout* r) { r->mutable_stages(0)->set_percent(0); },
       "rollout.stages[0].percent: 0 is outside 1..100"},
      {"OverHundred", [](v1::Rollout* r) { r->mutable_stages(3)->set_percent(101); },
       "rollout.stages[3].percent: 101 is outside 1..100"},
      {"NotIncreasing", [](v1::Rollout* r) { r->mutable_stages(2)->set_percent(10); },
       "rollout.stages[2].percent: 10 must be greater than the previous stage's 10"},
      {"LastNotHundred", [](v1::Rollout* r) { r->mutable_stages(3)->set_percent(90); },
       "rollout.stages[3].percent: the last stage must be 100, not 90"},
      {"NoReportTimeout", [](v1::Rollout* r) { r->mutable_stages(1)->set_report_timeout_seconds(0); },
       "rollout.stages[1].report_timeout_seconds"},
      {"WatchOverAMonth", [](v1::Rollout* r) { r->set_watch_after_completion_seconds(31 * 86400); },
       "rollout.watch_after_completion_seconds: 2678400 is over 30 days"},
      {"StageIntervalUnderTheFloor", [](v1::Rollout* r) { r->set_stage_resolve_interval_seconds(5); },
       "rollout.stage_resolve_interval_seconds: 5 is outside 30..3600"},
      {"NegativeGate", [](v1::Rollout* r) { r->mutable_gates()->set_max_boot_failure_delta(-0.1); },
       "rollout.gates.max_boot_failure_delta"},
      {"GateAboveOne",
       [](v1::Rollout* r) { r->mutable_gates()->set_max_engine_failure_delta(1.5); },
       "rollout.gates.max_engine_failure_delta: 1.5 is outside [0, 1]"},
      {"NanGate",
       [](v1::Rollout* r) {
         r->mutable_gates()->set_max_task_failure_delta(std::numeric_limits<double>::quiet_NaN());
       },
       "rollout.gates.max_task_failure_delta"},
  };
}

void PrintTo(const Fault& fault, std::ostream* out) { *out << fault.name; }

class DeployRolloutValidationTest : public ::testing::TestWithParam<Fault> {};

TEST_P(DeployRolloutValidationTest, RefusesNamingTheField) {
  v1::Rollout rollout = FidelityForAgentic("fidelity-agentic");
  GetParam().break_it(&rollout);
  EXPECT_THAT(ValidateRollout(rollout, *policy::DefaultPolicy()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().field)));
}

INSTANTIATE_TEST_SUITE_P(Faults, DeployRolloutValidationTest, ::testing::ValuesIn(Faults()),
                         [](const auto& info) { return info.param.name; });

TEST(DeployRolloutValidationTest, AcceptsEachKindOfAction) {
  const policy::Policy& policy = *policy::DefaultPolicy();
  v1::Rollout priority = FidelityForAgentic("fidelity-agentic");
  EXPECT_THAT(ValidateRollout(priority, policy), IsOk());

  v1::Rollout pin_path = FidelityForAgentic("pin-tinygemm");
  pin_path.mutable_action()->set_pin_path("w4a16-tinygemm-x86");
  EXPECT_THAT(ValidateRollout(pin_path, policy), IsOk());

  v1::Rollout pin_artifact = FidelityForAgentic("tinygemm-v2");
  auto* pinned = pin_artifact.mutable_action()->mutable_pin_artifact();
  pinned->set_path("w4a16-tinygemm");
  pinned->mutable_artifact()->set_uri("file:///srv/weights/tinygemm-v2.tar");
  pinned->mutable_artifact()->set_sha256(std::string(64, 'e'));
  EXPECT_THAT(ValidateRollout(pin_artifact, policy), IsOk());

  // A build of the signed catalog, named by its target path (the server
  // sends the signed uri, digest and files), with or without its digest.
  v1::Rollout pin_target = FidelityForAgentic("tinygemm-rc2");
  auto* by_target = pin_target.mutable_action()->mutable_pin_artifact();
  by_target->set_path("w4a16-tinygemm");
  by_target->mutable_artifact()->set_target_path("spark/w4a16-tinygemm-rc2");
  EXPECT_THAT(ValidateRollout(pin_target, policy), IsOk());
  by_target->mutable_artifact()->set_sha256(std::string(64, 'e'));
  EXPECT_THAT(ValidateRollout(pin_target, policy), IsOk());

  v1::Rollout everyone = FidelityForAgentic("everyone");
  everyone.clear_selector();
  everyone.mutable_selector()->set_all(true);
  EXPECT_THAT(ValidateRollout(everyone, policy), IsOk());
}

TEST(DeployRolloutValidationTest, StartRolloutResetsStateToStageZero) {
  v1::Rollout spec = FidelityForAgentic("fidelity-agentic");
  spec.set_state(v1::ROLLOUT_STATE_COMPLETED);
  spec.set_current_stage(3);
  spec.mutable_members()->set_devices(99);
  absl::StatusOr<v1::Rollout> started = StartRollout(spec, *policy::DefaultPolicy(), Epoch());
  ASSERT_THAT(started, IsOk());
  EXPECT_EQ(started->state(), v1::ROLLOUT_STATE_PROGRESSING);
  EXPECT_EQ(started->current_stage(), 0u);
  EXPECT_EQ(FromProtoTime(started->created_at()), Epoch());
  EXPECT_EQ(FromProtoTime(started->stage_started_at()), Epoch());
  ASSERT_EQ(started->stage_entered_at_size(), 1);
  EXPECT_EQ(started->members().devices(), 0u);

  spec.clear_stages();
  EXPECT_THAT(StartRollout(spec, *policy::DefaultPolicy(), Epoch()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rollout.stages")));
}

TEST(DeployRolloutValidationTest, ASpecThatSetsAServerFieldIsRefusedNamingIt) {
  EXPECT_THAT(RequireSpecOnly(FidelityForAgentic("fidelity-agentic")), IsOk());
  v1::Rollout with_state = FidelityForAgentic("fidelity-agentic");
  with_state.set_state(v1::ROLLOUT_STATE_COMPLETED);
  EXPECT_THAT(RequireSpecOnly(with_state),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("rollout.state"), HasSubstr("set by the server"))));
  v1::Rollout with_counts = FidelityForAgentic("fidelity-agentic");
  with_counts.mutable_members()->set_devices(3);
  EXPECT_THAT(RequireSpecOnly(with_counts),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rollout.members")));
  EXPECT_TRUE(IsServerSetRolloutField(*v1::Rollout::descriptor()->FindFieldByName("stage_entered_at")));
  EXPECT_FALSE(IsServerSetRolloutField(*v1::Rollout::descriptor()->FindFieldByName("gates")));
}

// At stage 2 of 4 (10%), paused or progressing.
v1::Rollout RunningAtSecondStage() {
  absl::StatusOr<v1::Rollout> started =
      StartRollout(FidelityForAgentic("fidelity-agentic"), *policy::DefaultPolicy(), Epoch());
  v1::Rollout running = started.value();
  running.set_current_stage(1);
  running.mutable_members()->set_devices(7);
  running.set_state_reason("baking");
  return running;
}

TEST(DeployRolloutValidationTest, AnUpdateChangesGatesAndLaterStagesInPlace) {
  const v1::Rollout running = RunningAtSecondStage();
  v1::Rollout spec = FidelityForAgentic("fidelity-agentic");
  spec.set_description("with a 25% stage");
  spec.set_precedence(5);
  spec.mutable_gates()->set_max_engine_failure_delta(0.02);
  spec.mutable_gates()->mutable_sequential()->set_false_pause_rate(0.05);
  spec.mutable_stages(2)->set_percent(25);
  spec.mutable_stages(1)->set_min_bake_seconds(60);
  absl::StatusOr<v1::Rollout> updated = UpdateRolloutSpec(running, spec, *policy::DefaultPolicy());
  ASSERT_THAT(updated, IsOk());
  EXPECT_EQ(updated->description(), "with a 25% stage");
  EXPECT_EQ(updated->precedence(), 5);
  EXPECT_EQ(updated->stages(2).percent(), 25u);
  EXPECT_EQ(updated->stages(1).min_bake_seconds(), 60u);
  EXPECT_DOUBLE_EQ(updated->gates().sequential().false_pause_rate(), 0.05);
  // Progress, clocks and counts are the server's and stay.
  EXPECT_EQ(updated->current_stage(), 1u);
  EXPECT_EQ(updated->state(), v1::ROLLOUT_STATE_PROGRESSING);
  EXPECT_EQ(updated->members().devices(), 7u);
  EXPECT_EQ(updated->created_at().SerializeAsString(), running.created_at().SerializeAsString());
  EXPECT_EQ(updated->state_reason(), "baking");
  EXPECT_EQ(DifferingSpecFields(*updated, running),
            (std::vector<std::string>{"description", "stages", "gates", "precedence"}));
}

TEST(DeployRolloutValidationTest, AnUpdateCannotChangeWhoIsInTheRolloutOrWhatTheyGet) {
  const policy::Policy& policy = *policy::DefaultPolicy();
  const v1::Rollout running = RunningAtSecondStage();
  v1::Rollout selector = FidelityForAgentic("fidelity-agentic");
  (*selector.mutable_selector()->mutable_match_labels())["workload"] = "chat";
  EXPECT_THAT(UpdateRolloutSpec(running, selector, policy),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("rollout.selector"), HasSubstr("delete it and create it again"))));
  v1::Rollout action = FidelityForAgentic("fidelity-agentic");
  action.mutable_action()->set_pin_path("w4a16-tinygemm-x86");
  EXPECT_THAT(UpdateRolloutSpec(running, action, policy),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("rollout.action")));
  v1::Rollout entered = FidelityForAgentic("fidelity-agentic");
  entered.mutable_stages(1)->set_percent(5);
  EXPECT_THAT(UpdateRolloutSpec(running, entered, policy),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("rollout.stages[1].percent"), HasSubstr("entered already"))));
  v1::Rollout shorter = FidelityForAgentic("fidelity-agentic");
  shorter.clear_stages();
  shorter.add_stages()->set_percent(100);
  shorter.mutable_stages(0)->set_report_timeout_seconds(60);
  EXPECT_THAT(UpdateRolloutSpec(running, shorter, policy),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("rollout.stages")));
  v1::Rollout invalid = FidelityForAgentic("fidelity-agentic");
  invalid.mutable_gates()->set_max_boot_failure_delta(2);
  EXPECT_THAT(UpdateRolloutSpec(running, invalid, policy),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_boot_failure_delta")));
  v1::Rollout with_state = FidelityForAgentic("fidelity-agentic");
  with_state.set_current_stage(2);
  EXPECT_THAT(UpdateRolloutSpec(running, with_state, policy),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rollout.current_stage")));
}

TEST(DeployRolloutValidationTest, AFinishedRolloutKeepsItsSpec) {
  for (v1::RolloutState state : {v1::ROLLOUT_STATE_COMPLETED, v1::ROLLOUT_STATE_ABORTED,
                                 v1::ROLLOUT_STATE_ROLLED_BACK}) {
    v1::Rollout finished = RunningAtSecondStage();
    finished.set_state(state);
    v1::Rollout spec = FidelityForAgentic("fidelity-agentic");
    spec.set_description("too late");
    EXPECT_THAT(UpdateRolloutSpec(finished, spec, *policy::DefaultPolicy()),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(v1::RolloutState_Name(state))));
  }
  v1::Rollout paused = RunningAtSecondStage();
  paused.set_state(v1::ROLLOUT_STATE_PAUSED);
  EXPECT_THAT(UpdateRolloutSpec(paused, FidelityForAgentic("fidelity-agentic"), *policy::DefaultPolicy()),
              IsOk());
}

}  // namespace
}  // namespace weightpath::deploy
