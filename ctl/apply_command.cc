#include "ctl/apply_command.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/control_characters.h"
#include "ctl/admin_output.h"
#include "ctl/admin_query.h"
#include "ctl/command_error.h"
#include "ctl/rollout_plan.h"
#include "ctl/rollout_view.h"
#include "ctl/rollout_yaml.h"
#include "ctl/text_file.h"
#include "ctl/view_output.h"
#include "deploy/rollout_validation.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "apply";

constexpr char kUsage[] =
    "usage: weightpathctl apply -f FILE|DIR [flags]\n\n"
    "Creates or updates the rollouts of rollout files (the format of 'rollout create\n"
    "-f'); a DIR means every *.yaml and *.yml in it, in name order. Applying the same\n"
    "files again changes nothing. Each rollout prints one line:\n"
    "  created     the server had no rollout of that id; it has now\n"
    "  updated     the server had it with another spec; the changed fields are\n"
    "              named. A running rollout keeps its stage and counts; description,\n"
    "              precedence, gates and the stages after the current one change.\n"
    "  unchanged   the server has it with the same spec\n"
    "  refused     the server would not take the change, with its reason: a new\n"
    "              selector or action, or a new percent for a stage already\n"
    "              entered (abort, 'rollout delete' and apply again), or a rollout\n"
    "              that has finished.\n"
    "Every file is read and checked before the server is asked: a file that is not a\n"
    "valid rollout (an unknown key, or a field only the server sets such as state or\n"
    "current_stage) stops the command with exit 2 and nothing applied. Exit 1 when\n"
    "any rollout was refused or a call failed, after the others were applied.\n\n"
    "--dry-run writes nothing: each rollout says what would be created or updated\n"
    "(the differing fields) and, from the server's registry (PlanRollout), how many\n"
    "registered devices it would move at its current stage (a new one: its first)\n"
    "and when complete, by hardware class, from which path to which, with example\n"
    "device ids. A rollout created again under an id the audit trail shows deleted\n"
    "is said so ('re-created'): it starts at stage 1; remove its file to keep it\n"
    "deleted.\n"
    "--prune (with -f DIR only) takes DIR as the whole set of rollouts on the server\n"
    "(one folder per server) and also deletes the rollouts the server holds that no\n"
    "file in DIR declares. A COMPLETED rollout still shapes its devices: deleting it\n"
    "moves them back to the policy's decision, so prune refuses (and lists) those\n"
    "that would move any device unless --force is given; a running or paused one is\n"
    "refused (abort it first). With --dry-run, prune says what it would delete.";

const std::vector<FlagSpec>& ApplyFlags() {
  static const std::vector<FlagSpec> flags = [] {
    std::vector<FlagSpec> all = {
        {"file", 'f', true, "a rollout YAML file, or a folder of them (required)"},
        {"dry-run", '\0', false,
         "write nothing: say what would change and how many devices would move"},
        {"prune", '\0', false,
         "with -f DIR: delete the server's rollouts that no file in DIR declares"},
        {"force", '\0', false,
         "with --prune: delete a rollout even when that moves devices back"},
        {"help", 'h', false, "show this help"},
    };
    for (FlagSpec& spec : ConnectionFlags()) all.push_back(std::move(spec));
    return all;
  }();
  return flags;
}

// The files `path` names: itself, or a folder's *.yaml and *.yml sorted.
absl::StatusOr<std::vector<std::string>> RolloutFiles(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) return std::vector<std::string>{path};
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() &&
        (absl::EndsWith(name, ".yaml") || absl::EndsWith(name, ".yml"))) {
      files.push_back(entry.path().string());
    }
  }
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("-f ", path, ": ", error.message()));
  }
  if (files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("-f ", path, ": no *.yaml or *.yml files"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool IsRefusal(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kFailedPrecondition || code == absl::StatusCode::kNotFound;
}

struct RolloutFile {
  std::string path;
  v1::Rollout rollout;
};

struct Tally {
  int created = 0, updated = 0, unchanged = 0, refused = 0, failed = 0, pruned = 0;
};

// Rollout id -> "deleted at T by WHO": the ids whose latest CreateRollout
// or DeleteRollout that succeeded, among the audit trail's newest events
// (one page, ListAuditEvents' default 1,000), is a deletion. A note, not a
// gate: without the trail (no permission, an old server) nothing is said.
using DeletedIds = std::map<std::string, std::string>;

DeletedIds ReadDeletedIds(FleetAdminConnection& connection) {
  DeletedIds deleted;
  absl::StatusOr<v1::ListAuditEventsResponse> events = CallFleetAdmin(
      connection, &v1::FleetAdmin::Stub::ListAuditEvents, v1::ListAuditEventsRequest(),
      "ListAuditEvents");
  if (!events.ok()) return deleted;
  std::set<std::string> decided;
  // Oldest first: the newest word on an id is the last one.
  for (int i = events->events_size() - 1; i >= 0; --i) {
    const v1::AuditEvent& event = events->events(i);
    if (event.result() != "OK" ||
        (event.rpc() != "CreateRollout" && event.rpc() != "DeleteRollout")) {
      continue;
    }
    if (!decided.insert(event.target()).second) continue;
    if (event.rpc() == "DeleteRollout") {
      deleted[event.target()] = absl::StrCat("deleted at ", FormatTimestamp(event.time()), " by ",
                                             ControlEscaped(event.identity()));
    }
  }
  return deleted;
}

// "at stage 2 of 3 (50%)": the stage a plan's at_stage counts.
std::string StageText(const v1::Rollout& spec, const v1::PlanRolloutResponse& plan) {
  const uint32_t stage = plan.stage();
  std::string text = absl::StrCat("at stage ", stage + 1, " of ", plan.stages());
  if (static_cast<int>(stage) < spec.stages_size()) {
    absl::StrAppend(&text, " (", spec.stages(stage).percent(), "%)");
  }
  return text;
}

// apply --dry-run for one file that would be created (`differing` empty)
// or updated: PlanRollout's answer, or its refusal.
void PlanApply(FleetAdminConnection& connection, const RolloutFile& file,
               const std::string& differing, CommandIo io, Tally* tally,
               const std::string& recreated = "") {
  const std::string& id = file.rollout.id();
  v1::PlanRolloutRequest request;
  *request.mutable_rollout() = file.rollout;
  absl::StatusOr<v1::PlanRolloutResponse> plan =
      CallFleetAdmin(connection, &v1::FleetAdmin::Stub::PlanRollout, request, "PlanRollout");
  if (!plan.ok()) {
    io.err << "weightpathctl apply: " << file.path << ": rollout '" << id << "' would be ";
    io.err << (differing.empty() ? std::string("created") : absl::StrCat("updated in ", differing))
           << "; ";
    ReportServerError(kCommand, plan.status(), io.err);
    if (IsRefusal(plan.status().code())) {
      ++tally->refused;
    } else {
      ++tally->failed;
    }
    return;
  }
  if (differing.empty()) {
    io.out << "rollout/" << id << " would be created (" << file.path << ")\n";
    if (!recreated.empty()) {
      io.out << "  re-created: '" << id << "' was " << recreated
             << "; it would start again at stage 1. To keep it deleted, remove its file\n";
    }
    ++tally->created;
  } else {
    io.out << "rollout/" << id << " would be updated: " << differing << " (" << file.path
           << ")\n";
    ++tally->updated;
  }
  io.out << "  " << StageText(file.rollout, *plan) << ": "
         << MoveCountLine(plan->at_stage(), "would move") << "\n";
  WriteMoveTable(plan->at_stage(), "    ", io.out);
  io.out << "  when complete: " << MoveCountLine(plan->when_complete(), "would move") << "\n";
  WriteMoveTable(plan->when_complete(), "    ", io.out);
}

// --prune: every rollout the server holds that no file declares is
// deleted, or with --dry-run planned. A deletion that would move devices
// is refused by the server unless force is set; a running rollout is
// refused whatever the flags.
void Prune(FleetAdminConnection& connection, const std::map<std::string, std::string>& file_of_id,
           const std::string& dir, bool dry_run, bool force, CommandIo io, Tally* tally) {
  absl::StatusOr<v1::ListRolloutsResponse> listed = CallFleetAdmin(
      connection, &v1::FleetAdmin::Stub::ListRollouts, v1::ListRolloutsRequest(), "ListRollouts");
  if (!listed.ok()) {
    io.err << "weightpathctl apply: --prune: ";
    ReportServerError(kCommand, listed.status(), io.err);
    ++tally->failed;
    return;
  }
  std::vector<std::string> held_back;
  for (const v1::Rollout& rollout : listed->rollouts()) {
    const std::string& id = rollout.id();
    if (file_of_id.count(id) > 0) continue;
    const std::string head = absl::StrCat("rollout/", id, " (", RolloutStateName(rollout.state()),
                                          ", no file in ", dir, " declares it)");
    const bool finished = rollout.state() == v1::ROLLOUT_STATE_COMPLETED ||
                          rollout.state() == v1::ROLLOUT_STATE_ABORTED ||
                          rollout.state() == v1::ROLLOUT_STATE_ROLLED_BACK;
    if (!finished) {
      io.out << head << " not pruned: it is still running; abort it first (weightpathctl "
             << "rollout abort " << id << ")\n";
      ++tally->refused;
      held_back.push_back(id);
      continue;
    }
    if (dry_run) {
      v1::PlanRolloutRequest request;
      request.mutable_rollout()->set_id(id);
      request.set_deletion(true);
      absl::StatusOr<v1::PlanRolloutResponse> plan =
          CallFleetAdmin(connection, &v1::FleetAdmin::Stub::PlanRollout, request, "PlanRollout");
      if (!plan.ok()) {
        io.err << "weightpathctl apply: --prune: rollout '" << id << "': ";
        ReportServerError(kCommand, plan.status(), io.err);
        ++tally->failed;
        continue;
      }
      // Only a COMPLETED rollout still shapes decisions (the server plans
      // the others' deletion as moving nobody they have not already left).
      const v1::PlanPolicyResponse& moves = plan->on_delete();
      const uint64_t moved = MovedDevices(moves);
      if (moved > 0 && !force) {
        io.out << head << " would not be pruned without --force: deleting it would move "
               << MoveCountLine(moves, "back to the policy's decision") << "\n";
        WriteMoveTable(moves, "    ", io.out);
        ++tally->refused;
        held_back.push_back(id);
        continue;
      }
      io.out << head << " would be deleted: " << MoveCountLine(moves, "would move back") << "\n";
      WriteMoveTable(moves, "    ", io.out);
      ++tally->pruned;
      continue;
    }
    v1::DeleteRolloutRequest request;
    request.set_id(id);
    request.set_force(force);
    absl::StatusOr<v1::DeleteRolloutResponse> deleted =
        CallFleetAdmin(connection, &v1::FleetAdmin::Stub::DeleteRollout, request, "DeleteRollout");
    if (!deleted.ok()) {
      io.out << head << " not pruned: " << deleted.status().message() << "\n";
      if (IsRefusal(deleted.status().code())) {
        ++tally->refused;
        held_back.push_back(id);
      } else {
        ++tally->failed;
      }
      continue;
    }
    io.out << head << " deleted (pruned): "
           << MoveCountLine(deleted->moved_back(), "moved back to the policy's decision") << "\n";
    WriteMoveTable(deleted->moved_back(), "    ", io.out);
    ++tally->pruned;
  }
  if (!held_back.empty()) {
    io.out << "not pruned: " << absl::StrJoin(held_back, ", ")
           << (force ? "" : " (a running one: abort it first; one that moves devices: --force)")
           << "\n";
  }
}

}  // namespace

int RunApplyCommand(const std::vector<std::string>& args, CommandIo io) {
  const std::string help = absl::StrCat(kUsage, "\n\n", FlagHelp(ApplyFlags()));
  if (args.empty()) return NoArguments(io.err, help);
  int exit_code = kExitOk;
  const std::optional<ParsedArguments> arguments = ParseFlags(
      kCommand, args, ApplyFlags(), [&help](std::ostream& out) { out << help; }, io, &exit_code);
  if (!arguments.has_value()) return exit_code;
  const std::optional<std::string> path = arguments->Value("file");
  if (!path.has_value()) {
    return UsageError(io.err, "weightpathctl apply", "-f FILE|DIR is required", kUsage);
  }
  if (arguments->Has("force") && !arguments->Has("prune")) {
    return UsageError(io.err, "weightpathctl apply", "--force applies to --prune only", kUsage);
  }
  if (arguments->Has("prune")) {
    std::error_code error;
    if (!std::filesystem::is_directory(*path, error)) {
      return UsageError(io.err, "weightpathctl apply",
                        absl::StrCat("--prune needs -f DIR, the folder of every rollout file; '",
                                     *path,
                                     "' is not a folder (with one file, every other rollout "
                                     "would be deleted)"),
                        kUsage);
    }
  }
  absl::StatusOr<std::vector<std::string>> paths = RolloutFiles(*path);
  if (!paths.ok()) return ReportError(kCommand, paths.status(), io.err);

  // Every file first, so a typo in the last one applies nothing.
  std::vector<RolloutFile> files;
  std::map<std::string, std::string> file_of_id;
  bool invalid = false;
  for (const std::string& file : *paths) {
    absl::StatusOr<std::string> text = ReadTextFile(file);
    absl::StatusOr<v1::Rollout> rollout =
        text.ok() ? ParseRolloutYaml(*text, file) : absl::StatusOr<v1::Rollout>(text.status());
    if (rollout.ok() && rollout->id().empty()) {
      rollout = absl::InvalidArgumentError(absl::StrCat(file, ": rollout.id: is required"));
    }
    if (rollout.ok()) {
      auto [seen, inserted] = file_of_id.emplace(rollout->id(), file);
      if (!inserted) {
        rollout = absl::InvalidArgumentError(absl::StrCat(
            file, ": rollout.id: '", rollout->id(), "' is also the id in ", seen->second));
      }
    }
    if (!rollout.ok()) {
      ReportError(kCommand, rollout.status(), io.err);
      invalid = true;
      continue;
    }
    files.push_back({file, *std::move(rollout)});
  }
  if (invalid) {
    io.err << "weightpathctl apply: nothing applied: fix the files above first\n";
    return kExitUsage;
  }

  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(*arguments);
  if (!connection.ok()) return ReportError(kCommand, connection.status(), io.err);
  const bool dry_run = arguments->Has("dry-run");
  Tally tally;
  std::optional<DeletedIds> deleted_ids;  // read once, when a rollout is to be created
  for (const RolloutFile& file : files) {
    const std::string& id = file.rollout.id();
    v1::GetRolloutRequest get;
    get.set_id(id);
    absl::StatusOr<v1::Rollout> existing =
        CallFleetAdmin(*connection, &v1::FleetAdmin::Stub::GetRollout, get, "GetRollout");
    if (existing.ok()) {
      const std::vector<std::string> differing = deploy::DifferingSpecFields(file.rollout, *existing);
      if (differing.empty()) {
        io.out << "rollout/" << id << " unchanged (" << file.path << ")\n";
        ++tally.unchanged;
        continue;
      }
      if (dry_run) {
        PlanApply(*connection, file, absl::StrJoin(differing, ", "), io, &tally);
        continue;
      }
      v1::UpdateRolloutRequest update;
      *update.mutable_rollout() = file.rollout;
      absl::StatusOr<v1::Rollout> changed =
          CallFleetAdmin(*connection, &v1::FleetAdmin::Stub::UpdateRollout, update, "UpdateRollout");
      if (!changed.ok()) {
        io.err << "weightpathctl apply: " << file.path << ": rollout '" << id << "' differs in "
               << absl::StrJoin(differing, ", ") << "; ";
        ReportServerError(kCommand, changed.status(), io.err);
        // The server's judgement on this spec, not a failure to reach it.
        if (IsRefusal(changed.status().code())) {
          ++tally.refused;
        } else {
          ++tally.failed;
        }
        continue;
      }
      io.out << "rollout/" << id << " updated: " << absl::StrJoin(differing, ", ") << " ("
             << file.path << ")\n";
      ++tally.updated;
      continue;
    }
    if (existing.status().code() != absl::StatusCode::kNotFound) {
      ReportServerError(kCommand, existing.status(), io.err);
      ++tally.failed;
      continue;
    }
    if (!deleted_ids.has_value()) deleted_ids = ReadDeletedIds(*connection);
    const auto deletion = deleted_ids->find(id);
    const std::string recreated =
        deletion == deleted_ids->end() ? std::string() : deletion->second;
    if (dry_run) {
      PlanApply(*connection, file, "", io, &tally, recreated);
      continue;
    }
    v1::CreateRolloutRequest create;
    *create.mutable_rollout() = file.rollout;
    absl::StatusOr<v1::Rollout> made =
        CallFleetAdmin(*connection, &v1::FleetAdmin::Stub::CreateRollout, create, "CreateRollout");
    if (!made.ok()) {
      io.err << "weightpathctl apply: " << file.path << ": ";
      ReportServerError(kCommand, made.status(), io.err);
      ++tally.failed;
      continue;
    }
    io.out << "rollout/" << id << " created (" << file.path << ")\n";
    if (!recreated.empty()) {
      io.out << "  re-created: '" << id << "' was " << recreated
             << "; it starts again at stage 1. To keep a rollout deleted, remove its file "
                "(apply --prune deletes the rollouts whose files are gone)\n";
    }
    ++tally.created;
  }
  if (arguments->Has("prune")) {
    Prune(*connection, file_of_id, *path, dry_run, arguments->Has("force"), io, &tally);
  }
  if (dry_run) io.out << "dry run, nothing written: ";
  io.out << Counted(files.size(), "rollout", "rollouts") << ": " << tally.created
         << (dry_run ? " would be created, " : " created, ") << tally.updated << " updated, "
         << tally.unchanged << " unchanged, " << tally.refused << " refused, " << tally.failed
         << " failed";
  if (arguments->Has("prune")) {
    io.out << "; " << tally.pruned << (dry_run ? " would be pruned" : " pruned");
  }
  io.out << "\n";
  return tally.refused + tally.failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace weightpath::ctl
