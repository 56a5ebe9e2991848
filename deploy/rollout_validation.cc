#include "deploy/rollout_validation.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/control_characters.h"
#include "common/field_violation.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "common/text_bounds.h"
#include "deploy/label_selector.h"
#include "google/protobuf/util/message_differencer.h"

namespace weightpath::deploy {
namespace {

constexpr size_t kMaxRolloutIdLength = 63;
// A month is as long as anyone reads a finished rollout's reports as its own.
constexpr uint32_t kMaxWatchAfterCompletionSeconds = 30 * 86400;
// Under 30 s every selected device would poll faster than the agent's own
// floor allows; over an hour is not shorter than the steady interval.
constexpr uint32_t kMaxHorizonSeconds = 30 * 86400;
constexpr uint32_t kMinStageResolveIntervalSeconds = 30;
constexpr uint32_t kMaxStageResolveIntervalSeconds = 3600;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return InvalidArgumentForField(field, absl::StrCat(field, ": ", what));
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// Ids go into URLs, metric labels and the bucket hash input (where '/' is
// the separator), so they are kept to a plain, slash-free charset.
absl::Status ValidateRolloutId(absl::string_view id) {
  if (id.empty()) return Invalid("rollout.id", "must not be empty");
  if (id.size() > kMaxRolloutIdLength) {
    return Invalid("rollout.id", absl::StrCat("'", ControlEscaped(CutToBytes(id, kMaxRolloutIdLength)), "' is ",
                                              id.size(), " bytes long; at most ",
                                              kMaxRolloutIdLength, " characters"));
  }
  bool charset_ok = std::all_of(id.begin(), id.end(), [](char c) {
    return IsLowerAlnum(c) || c == '-' || c == '_' || c == '.';
  });
  if (!charset_ok || !IsLowerAlnum(id.front()) || !IsLowerAlnum(id.back())) {
    return Invalid("rollout.id",
                   absl::StrCat("'", ControlEscaped(id),
                                "' must be lowercase letters and digits, with '-', '_' or '.' "
                                "inside, starting and ending with a letter or digit"));
  }
  return absl::OkStatus();
}

bool IsSha256Hex(absl::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

absl::Status ValidateAction(const v1::RolloutAction& action, const policy::Policy& policy) {
  switch (action.action_case()) {
    case v1::RolloutAction::kSetPriority:
      if (action.set_priority() != v1::PRIORITY_SPEED &&
          action.set_priority() != v1::PRIORITY_FIDELITY) {
        return Invalid("rollout.action.set_priority", "must be PRIORITY_SPEED or PRIORITY_FIDELITY");
      }
      return absl::OkStatus();
    case v1::RolloutAction::kPinPath:
      if (policy.FindPath(action.pin_path()) == nullptr) {
        return Invalid("rollout.action.pin_path",
                       absl::StrCat("unknown path id '", action.pin_path(), "' in policy ",
                                    policy.version()));
      }
      return absl::OkStatus();
    case v1::RolloutAction::kPinArtifact: {
      const v1::PinnedArtifact& pinned = action.pin_artifact();
      bool known_name = std::any_of(
          policy.paths().begin(), policy.paths().end(),
          [&](const policy::PathDefinition& path) { return path.name == pinned.path(); });
      if (!known_name) {
        return Invalid("rollout.action.pin_artifact.path",
                       absl::StrCat("unknown path name '", pinned.path(), "' in policy ",
                                    policy.version()));
      }
      const v1::Artifact& artifact = pinned.artifact();
      // A pin is one file the operator names by uri and digest, or a build
      // of the signed catalog named by its target path alone, which the
      // server completes from the verified targets (a directory build too:
      // its files are checked against their manifest there).
      if (artifact.files_size() > 0) {
        return Invalid("rollout.action.pin_artifact.artifact.files",
                       "a directory build is pinned by its target_path alone (the server sends "
                       "the signed catalog's files), not by listing its files");
      }
      if (artifact.uri().empty() && !artifact.target_path().empty()) {
        if (!artifact.sha256().empty() && !IsSha256Hex(artifact.sha256())) {
          return Invalid("rollout.action.pin_artifact.artifact.sha256",
                         absl::StrCat("'", artifact.sha256(), "' must be 64 lowercase hex digits"));
        }
        return absl::OkStatus();
      }
      if (!absl::StartsWith(artifact.uri(), "https://") &&
          !absl::StartsWith(artifact.uri(), "http://") &&
          !absl::StartsWith(artifact.uri(), "file://")) {
        return Invalid("rollout.action.pin_artifact.artifact.uri",
                       absl::StrCat("'", artifact.uri(),
                                    "' must start with https://, http:// or file:// (or give "
                                    "target_path alone: a build of the signed catalog)"));
      }
      if (!IsSha256Hex(artifact.sha256())) {
        return Invalid("rollout.action.pin_artifact.artifact.sha256",
                       absl::StrCat("'", artifact.sha256(), "' must be 64 lowercase hex digits"));
      }
      return absl::OkStatus();
    }
    case v1::RolloutAction::ACTION_NOT_SET:
      break;
  }
  return Invalid("rollout.action", "must set one of set_priority, pin_path or pin_artifact");
}

absl::Status ValidateStages(const v1::Rollout& rollout) {
  if (rollout.stages().empty()) return Invalid("rollout.stages", "at least one stage is required");
  uint32_t previous_percent = 0;
  for (int i = 0; i < rollout.stages_size(); ++i) {
    const v1::RolloutStage& stage = rollout.stages(i);
    std::string field = absl::StrCat("rollout.stages[", i, "]");
    if (stage.percent() < 1 || stage.percent() > 100) {
      return Invalid(absl::StrCat(field, ".percent"),
                     absl::StrCat(stage.percent(), " is outside 1..100"));
    }
    if (stage.percent() <= previous_percent) {
      return Invalid(absl::StrCat(field, ".percent"),
                     absl::StrCat(stage.percent(), " must be greater than the previous stage's ",
                                  previous_percent));
    }
    if (stage.report_timeout_seconds() == 0) {
      return Invalid(absl::StrCat(field, ".report_timeout_seconds"),
                     "must be positive: a member that never reports has to count as failed");
    }
    previous_percent = stage.percent();
  }
  for (int i = 0; i < rollout.stages_size(); ++i) {
    if (rollout.stages(i).horizon_seconds() > kMaxHorizonSeconds) {
      return Invalid(absl::StrCat("rollout.stages[", i, "].horizon_seconds"),
                     absl::StrCat(rollout.stages(i).horizon_seconds(), " is over 30 days"));
    }
  }
  if (previous_percent != 100) {
    return Invalid(absl::StrCat("rollout.stages[", rollout.stages_size() - 1, "].percent"),
                   absl::StrCat("the last stage must be 100, not ", previous_percent));
  }
  return absl::OkStatus();
}

absl::Status ValidateGate(double threshold, absl::string_view name) {
  if (std::isnan(threshold) || threshold < 0.0 || threshold > 1.0) {
    return Invalid(absl::StrCat("rollout.gates.", name),
                   absl::StrCat(threshold, " is outside [0, 1]"));
  }
  return absl::OkStatus();
}

// 0 stands for the default; anything else (NaN included) must lie above
// `low` and up to `high`.
bool DefaultOrWithin(double value, double low, double high, bool high_inclusive) {
  return value == 0.0 || (value > low && (high_inclusive ? value <= high : value < high));
}

absl::Status ValidateSequentialGates(const v1::SequentialGates& sequential) {
  if (!DefaultOrWithin(sequential.false_pause_rate(), 0.0, 0.5, true)) {
    return Invalid("rollout.gates.sequential.false_pause_rate",
                   absl::StrCat(sequential.false_pause_rate(),
                                " is outside (0, 0.5] (0 for the default 0.01)"));
  }
  if (!DefaultOrWithin(sequential.min_relative_increase(), 1.0, 100.0, true)) {
    return Invalid("rollout.gates.sequential.min_relative_increase",
                   absl::StrCat(sequential.min_relative_increase(),
                                " is outside (1, 100] (0 for the default 1.5)"));
  }
  if (!sequential.fail_test().empty() && sequential.fail_test() != "conditional" &&
      sequential.fail_test() != "universal") {
    return Invalid("rollout.gates.sequential.fail_test",
                   absl::StrCat("'", sequential.fail_test().substr(0, 64),
                                "' is not conditional or universal (empty: conditional)"));
  }
  if (!DefaultOrWithin(sequential.min_absolute_increase(), 0.0, 1.0, false)) {
    return Invalid("rollout.gates.sequential.min_absolute_increase",
                   absl::StrCat(sequential.min_absolute_increase(),
                                " is outside (0, 1) (0 for the default 0.01)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRollout(const v1::Rollout& rollout, const policy::Policy& policy) {
  RETURN_IF_ERROR(ValidateRolloutId(rollout.id()));
  RETURN_IF_ERROR(ValidateDeviceSelector(rollout.selector(), "rollout.selector"));
  if (IsEmptySelector(rollout.selector()) && !rollout.selector().all()) {
    return Invalid("rollout.selector",
                   "is empty; set `all: true` to target every device explicitly");
  }
  RETURN_IF_ERROR(ValidateAction(rollout.action(), policy));
  RETURN_IF_ERROR(ValidateStages(rollout));
  RETURN_IF_ERROR(ValidateGate(rollout.gates().max_boot_failure_delta(), "max_boot_failure_delta"));
  RETURN_IF_ERROR(
      ValidateGate(rollout.gates().max_engine_failure_delta(), "max_engine_failure_delta"));
  RETURN_IF_ERROR(ValidateGate(rollout.gates().max_task_failure_delta(), "max_task_failure_delta"));
  RETURN_IF_ERROR(ValidateSequentialGates(rollout.gates().sequential()));
  if (!rollout.gates().advance().empty() && rollout.gates().advance() != "at_horizon" &&
      rollout.gates().advance() != "on_pass") {
    return Invalid("rollout.gates.advance",
                   absl::StrCat("'", rollout.gates().advance().substr(0, 64),
                                "' is not at_horizon or on_pass (empty: at_horizon with "
                                "sequential gates, on_pass without)"));
  }
  if (rollout.watch_after_completion_seconds() > kMaxWatchAfterCompletionSeconds) {
    return Invalid("rollout.watch_after_completion_seconds",
                   absl::StrCat(rollout.watch_after_completion_seconds(), " is over 30 days (",
                                kMaxWatchAfterCompletionSeconds, "); 0 for the default, one day"));
  }
  if (rollout.stage_resolve_interval_seconds() != 0 &&
      (rollout.stage_resolve_interval_seconds() < kMinStageResolveIntervalSeconds ||
       rollout.stage_resolve_interval_seconds() > kMaxStageResolveIntervalSeconds)) {
    return Invalid("rollout.stage_resolve_interval_seconds",
                   absl::StrCat(rollout.stage_resolve_interval_seconds(),
                                " is outside 30..3600 (0 for the server's, 5 minutes)"));
  }
  return absl::OkStatus();
}

bool IsServerSetRolloutField(const google::protobuf::FieldDescriptor& field) {
  static constexpr absl::string_view kServerSet[] = {
      "state",        "current_stage", "created_at", "stage_started_at", "state_reason",
      "members",      "control",       "stage_entered_at", "sequential_gates",
      "all_members",  "completed_at",  "failures_after_completion", "stage_plans",
      "stage_horizon"};
  return field.containing_type() == v1::Rollout::descriptor() &&
         std::find(std::begin(kServerSet), std::end(kServerSet), field.name()) !=
             std::end(kServerSet);
}

absl::Status RequireSpecOnly(const v1::Rollout& spec) {
  std::vector<const google::protobuf::FieldDescriptor*> set;
  spec.GetReflection()->ListFields(spec, &set);
  for (const google::protobuf::FieldDescriptor* field : set) {
    if (!IsServerSetRolloutField(*field)) continue;
    return Invalid(absl::StrCat("rollout.", field->name()),
                   "is set by the server (a rollout's progress, times and counts), not by a "
                   "spec; leave it empty");
  }
  return absl::OkStatus();
}

std::vector<std::string> DifferingSpecFields(const v1::Rollout& a, const v1::Rollout& b) {
  std::vector<std::string> differing;
  const google::protobuf::Descriptor* descriptor = v1::Rollout::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (IsServerSetRolloutField(*field)) continue;
    google::protobuf::util::MessageDifferencer differencer;
    const std::vector<const google::protobuf::FieldDescriptor*> only = {field};
    if (!differencer.CompareWithFields(a, b, only, only)) differing.push_back(field->name());
  }
  return differing;
}

absl::StatusOr<v1::Rollout> UpdateRolloutSpec(const v1::Rollout& current, const v1::Rollout& spec,
                                              const policy::Policy& policy) {
  RETURN_IF_ERROR(RequireSpecOnly(spec));
  RETURN_IF_ERROR(ValidateRollout(spec, policy));
  auto refused = [&](absl::string_view field, absl::string_view why) {
    return WithViolatedField(
        absl::FailedPreconditionError(absl::StrCat(field, ": ", why)), field);
  };
  switch (current.state()) {
    case v1::ROLLOUT_STATE_PROGRESSING:
    case v1::ROLLOUT_STATE_PAUSED:
      break;
    default:
      return WithViolatedField(
          absl::FailedPreconditionError(absl::StrCat(
              "cannot update rollout '", current.id(), "': it is ",
              v1::RolloutState_Name(current.state()),
              "; a finished rollout keeps the spec it ran with (delete it, then create it "
              "again under the same id)")),
          "rollout.id");
  }
  constexpr absl::string_view kStartAgain =
      "; abort the rollout, delete it and create it again (the id can be used again)";
  google::protobuf::util::MessageDifferencer differencer;
  if (!differencer.Equals(current.selector(), spec.selector())) {
    return refused("rollout.selector",
                   absl::StrCat("cannot change while the rollout runs: its members, its control "
                                "group and every outcome so far were chosen by the old selector",
                                kStartAgain));
  }
  if (!differencer.Equals(current.action(), spec.action())) {
    return refused("rollout.action",
                   absl::StrCat("cannot change while the rollout runs: its members were sent the "
                                "old action's build and every outcome so far is about it",
                                kStartAgain));
  }
  const int entered = static_cast<int>(current.current_stage()) + 1;
  if (spec.stages_size() < entered) {
    return refused("rollout.stages",
                   absl::StrCat("the rollout has entered stage ", entered, " of ",
                                current.stages_size(), "; a new spec keeps every stage up to it (",
                                spec.stages_size(), " given)"));
  }
  for (int i = 0; i < entered && i < current.stages_size(); ++i) {
    if (spec.stages(i).percent() != current.stages(i).percent()) {
      return refused(absl::StrCat("rollout.stages[", i, "].percent"),
                     absl::StrCat("stage ", i + 1, " has been entered already at ",
                                  current.stages(i).percent(), "%; changing it to ",
                                  spec.stages(i).percent(),
                                  "% would move devices in or out of the rollout mid-stage"));
    }
  }
  v1::Rollout next = current;
  next.set_description(spec.description());
  *next.mutable_stages() = spec.stages();
  *next.mutable_gates() = spec.gates();
  next.set_precedence(spec.precedence());
  next.set_watch_after_completion_seconds(spec.watch_after_completion_seconds());
  next.set_stage_resolve_interval_seconds(spec.stage_resolve_interval_seconds());
  return next;
}

absl::StatusOr<v1::Rollout> StartRollout(const v1::Rollout& spec, const policy::Policy& policy,
                                         absl::Time now) {
  RETURN_IF_ERROR(ValidateRollout(spec, policy));
  v1::Rollout rollout = spec;
  rollout.set_state(v1::ROLLOUT_STATE_PROGRESSING);
  rollout.set_current_stage(0);
  *rollout.mutable_created_at() = ToProtoTime(now);
  *rollout.mutable_stage_started_at() = ToProtoTime(now);
  rollout.clear_stage_entered_at();
  *rollout.add_stage_entered_at() = ToProtoTime(now);
  rollout.clear_state_reason();
  rollout.clear_members();
  rollout.clear_control();
  rollout.clear_all_members();
  return rollout;
}

}  // namespace weightpath::deploy
