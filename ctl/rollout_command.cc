#include "ctl/rollout_command.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "ctl/admin_query.h"
#include "ctl/command_error.h"
#include "ctl/rollout_client.h"
#include "ctl/rollout_view.h"
#include "ctl/rollout_yaml.h"
#include "ctl/text_file.h"
#include "ctl/rollout_devices.h"
#include "ctl/rollout_plan.h"
#include "ctl/rollout_promote.h"
#include "ctl/view_output.h"
#include "absl/time/clock.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "rollout";

enum class Action {
  kCreate, kStatus, kList, kPause, kResume, kAdvance, kAbort, kDelete, kPromote
};

struct ActionSpec {
  absl::string_view name;
  Action action;
  bool takes_id;
};

constexpr ActionSpec kActions[] = {
    {"create", Action::kCreate, false}, {"status", Action::kStatus, true},
    {"list", Action::kList, false},     {"pause", Action::kPause, true},
    {"resume", Action::kResume, true},  {"advance", Action::kAdvance, true},
    {"abort", Action::kAbort, true},    {"delete", Action::kDelete, true},
    {"promote", Action::kPromote, true},
};

std::vector<FlagSpec> RolloutFlags(Action action) {
  std::vector<FlagSpec> flags = ConnectionFlags();
  if (action == Action::kCreate) {
    flags.push_back({"file", 'f', true, "rollout YAML (the Rollout message; required)"});
  }
  if (action == Action::kPause || action == Action::kResume || action == Action::kAdvance ||
      action == Action::kAbort) {
    flags.push_back({"reason", '\0', true, "why, recorded as the rollout's state reason"});
  }
  if (action == Action::kDelete) {
    flags.push_back({"force", '\0', false,
                     "delete even when that moves devices back to the policy's decision"});
  }
  if (action == Action::kPromote) {
    flags.push_back({"policy", '\0', true,
                     "the served policy document: print it whole with the rollout's rule(s) "
                     "added, checked by loading it"});
  }
  if (action == Action::kStatus) {
    flags.push_back({"watch", 'w', false,
                     "refresh until the rollout completes (exit 0), pauses, rolls back or is "
                     "aborted (exit 1); Ctrl-C exits 130"});
    flags.push_back({"interval", '\0', true, "with --watch: time between reads (default 2s)"});
    for (FlagSpec& flag : RolloutDeviceFlags()) flags.push_back(std::move(flag));
  }
  flags.push_back({"output", 'o', true, "table (default), json or yaml"});
  flags.push_back({"help", 'h', false, "show this help"});
  return flags;
}

void WriteHelp(std::ostream& out) {
  out << "usage: weightpathctl rollout create -f rollout.yaml [flags]\n"
         "       weightpathctl rollout status|pause|resume|advance|abort ID [flags]\n"
         "       weightpathctl rollout status ID --watch [--interval 2s] [flags]\n"
         "       weightpathctl rollout status ID --devices [--silent] [--failed] [--rolled-back]\n"
         "                     [--unreached] [--pending] [--page-size N] [--page-token T] [flags]\n"
         "       weightpathctl rollout list [flags]\n"
         "       weightpathctl rollout delete ID [--force] [flags]\n"
         "       weightpathctl rollout promote ID [--policy FILE] [flags]\n\n"
         "status shows the progress view: stage k/n and percent, members and how many\n"
         "report, outcomes of members against the control group, gate readings, state\n"
         "and reason. pause/resume/advance/abort print the rollout after the change.\n"
         "status --watch reads the rollout every --interval and shows it again: in place\n"
         "when stdout is a terminal, otherwise one block each time it changed. It ends\n"
         "when the rollout completes (exit 0) or pauses, rolls back or is aborted\n"
         "(exit 1); Ctrl-C ends it with exit 130.\n"
         "status --devices lists the members, a page at a time: the stage that admitted\n"
         "each, its first resolve the rollout shaped, last report, outcome and detail, and\n"
         "where it stands (engine_started, failed, rolled_back, cache_full, silent,\n"
         "unreached, pending); --silent, --failed, --rolled-back, --unreached and\n"
         "--pending keep the members in any of those standings.\n"
         "delete removes a COMPLETED, ABORTED or ROLLED_BACK rollout, so that its id can\n"
         "be used again (a running or paused one: abort it first). Its outcomes stay in\n"
         "the store and do not count for a new rollout of the same id. The devices a\n"
         "completed rollout moved get the policy's own decision at their next resolve:\n"
         "the server counts them first (by class, from which path to which) and refuses\n"
         "the deletion when any registered device would move, unless --force is given;\n"
         "delete prints the count either way.\n"
         "promote prints the policy change that makes the rollout's action permanent:\n"
         "the rule(s) to put first under the policy document's rules:, so that it can be\n"
         "reviewed like any policy edit. --policy FILE (the served document) prints the\n"
         "whole document with them added, checked by loading it; check what it moves\n"
         "with 'weightpathctl policy plan --policy FILE' before it is loaded, then delete\n"
         "the rollout. A pin_artifact rollout, and a selector a rule cannot express\n"
         "(NotIn, Exists, DoesNotExist), have no policy equivalent and are refused.\n\n"
      << FlagHelp(RolloutFlags(Action::kCreate))
      << "  -w, --watch     (status) refresh until the rollout ends or stops\n"
         "  --interval D    (status --watch) time between reads, e.g. 2s or 500ms (default 2s)\n"
      << "  --reason TEXT   (pause, resume, advance, abort) why, kept as the state reason\n"
         "  --force         (delete) delete even when that moves devices back\n"
         "  --policy FILE   (promote) the served policy document, printed whole with the\n"
         "                  rollout's rule(s) added\n";
}

absl::Status PrintRollout(const v1::Rollout& rollout, ViewOutput format, std::ostream& out) {
  if (format != ViewOutput::kTable) return WriteMessage(rollout, format, out);
  out << FormatRolloutProgress(rollout);
  return absl::OkStatus();
}

// The rollout is read first, so the line can say what was deleted. The
// server counts the devices the deletion moves back and refuses it when
// there are any and force is not set; the count is printed either way.
absl::Status DeleteRollout(const std::string& id, bool force, ViewOutput format,
                           FleetAdminConnection& connection, std::ostream& out) {
  v1::GetRolloutRequest get;
  get.set_id(id);
  absl::StatusOr<v1::Rollout> rollout =
      CallFleetAdmin(connection, &v1::FleetAdmin::Stub::GetRollout, get, "GetRollout");
  if (!rollout.ok()) return rollout.status();
  v1::DeleteRolloutRequest request;
  request.set_id(id);
  request.set_force(force);
  absl::StatusOr<v1::DeleteRolloutResponse> deleted =
      CallFleetAdmin(connection, &v1::FleetAdmin::Stub::DeleteRollout, request, "DeleteRollout");
  if (!deleted.ok()) return deleted.status();
  if (format != ViewOutput::kTable) return WriteMessage(*deleted, format, out);
  out << "rollout/" << id << " deleted (it was " << RolloutStateName(rollout->state())
      << "); its outcomes stay in the store, and the id can be used again\n";
  if (!deleted->has_moved_back()) {
    // Only a COMPLETED rollout still shapes decisions when it is deleted.
    out << "no device moves back: an " << RolloutStateName(rollout->state())
        << " rollout shapes no decision\n";
    return absl::OkStatus();
  }
  out << MoveCountLine(deleted->moved_back(), "moved back to the policy's decision") << "\n";
  WriteMoveTable(deleted->moved_back(), "  ", out);
  if (rollout->state() == v1::ROLLOUT_STATE_COMPLETED && MovedDevices(deleted->moved_back()) > 0) {
    out << "they get the policy's own decision at their next resolve\n";
  }
  return absl::OkStatus();
}

absl::Status PromoteRollout(const std::string& id, const ParsedArguments& arguments,
                            FleetAdminConnection& connection, std::ostream& out) {
  // The document is read and checked before the server is asked.
  std::optional<std::string> document;
  const std::optional<std::string> policy_path = arguments.Value("policy");
  if (policy_path.has_value()) {
    absl::StatusOr<std::string> text = ReadTextFile(*policy_path);
    if (!text.ok()) return text.status();
    document = *std::move(text);
  }
  v1::GetRolloutRequest get;
  get.set_id(id);
  ASSIGN_OR_RETURN(const v1::Rollout rollout,
                   CallFleetAdmin(connection, &v1::FleetAdmin::Stub::GetRollout, get, "GetRollout"));
  ASSIGN_OR_RETURN(const Promotion promotion,
                   PromoteToPolicy(rollout, document, policy_path.value_or("")));
  out << promotion.text;
  return absl::OkStatus();
}

absl::Status Run(const ActionSpec& spec, const std::string& id, const ParsedArguments& arguments,
                 std::ostream& out) {
  absl::StatusOr<ViewOutput> parsed_format = ParseViewOutput(arguments.Value("output"));
  if (!parsed_format.ok()) return parsed_format.status();
  const ViewOutput format = *parsed_format;
  // The file is read and checked before any connection, so a typo in it
  // never depends on the server being up.
  v1::CreateRolloutRequest create;
  if (spec.action == Action::kCreate) {
    std::optional<std::string> file = arguments.Value("file");
    if (!file) return absl::InvalidArgumentError("-f FILE is required (the rollout YAML)");
    absl::StatusOr<std::string> text = ReadTextFile(*file);
    if (!text.ok()) return text.status();
    absl::StatusOr<v1::Rollout> rollout = ParseRolloutYaml(*text, *file);
    if (!rollout.ok()) return rollout.status();
    *create.mutable_rollout() = *std::move(rollout);
  }
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(arguments);
  if (!connection.ok()) return connection.status();
  std::unique_ptr<grpc::ClientContext> context = connection->NewContext();
  v1::Rollout rollout;
  v1::RolloutControlRequest control;
  control.set_id(id);
  control.set_reason(arguments.Value("reason").value_or(""));
  grpc::Status status;
  absl::string_view rpc;
  switch (spec.action) {
    case Action::kCreate:
      rpc = "CreateRollout";
      status = connection->stub().CreateRollout(context.get(), create, &rollout);
      break;
    case Action::kStatus: {
      if (arguments.Has("devices")) {
        ASSIGN_OR_RETURN(v1::ListRolloutDevicesRequest request, RolloutDevicesRequest(id, arguments));
        v1::ListRolloutDevicesResponse response;
        status = connection->stub().ListRolloutDevices(context.get(), request, &response);
        if (!status.ok()) return connection->CallStatus("ListRolloutDevices", status, *context);
        if (format != ViewOutput::kTable) return WriteMessage(response, format, out);
        out << FormatRolloutDevices(response);
        return absl::OkStatus();
      }
      rpc = "GetRollout";
      v1::GetRolloutRequest request;
      request.set_id(id);
      status = connection->stub().GetRollout(context.get(), request, &rollout);
      break;
    }
    case Action::kList: {
      v1::ListRolloutsResponse response;
      status = connection->stub().ListRollouts(context.get(), v1::ListRolloutsRequest(), &response);
      if (!status.ok()) return connection->CallStatus("ListRollouts", status, *context);
      if (format != ViewOutput::kTable) {
        RETURN_IF_ERROR(WriteMessage(response, format, out));
      } else {
        out << FormatRolloutList({response.rollouts().begin(), response.rollouts().end()});
      }
      return absl::OkStatus();
    }
    case Action::kPause:
      rpc = "PauseRollout";
      status = connection->stub().PauseRollout(context.get(), control, &rollout);
      break;
    case Action::kResume:
      rpc = "ResumeRollout";
      status = connection->stub().ResumeRollout(context.get(), control, &rollout);
      break;
    case Action::kAdvance:
      rpc = "AdvanceRollout";
      status = connection->stub().AdvanceRollout(context.get(), control, &rollout);
      break;
    case Action::kAbort:
      rpc = "AbortRollout";
      status = connection->stub().AbortRollout(context.get(), control, &rollout);
      break;
    case Action::kDelete:
      return DeleteRollout(id, arguments.Has("force"), format, *connection, out);
    case Action::kPromote:
      return PromoteRollout(id, arguments, *connection, out);
  }
  if (!status.ok()) return connection->CallStatus(rpc, status, *context);
  return PrintRollout(rollout, format, out);
}

volatile std::sig_atomic_t interrupted = 0;

void OnInterrupt(int) { interrupted = 1; }

// Whether the rollout has stopped moving on its own: completed, or waiting
// for an operator (paused), or finished badly.
bool Settled(v1::RolloutState state) {
  return state == v1::ROLLOUT_STATE_COMPLETED || state == v1::ROLLOUT_STATE_PAUSED ||
         state == v1::ROLLOUT_STATE_ROLLED_BACK || state == v1::ROLLOUT_STATE_ABORTED;
}

constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

// What a change is, for the one-block-per-change output: the rollout as
// shown, less the bake countdown in its state reason ("baking, 25m3.5s
// left"), which moves on every read while nothing else does.
std::string ChangeKey(v1::Rollout rollout) {
  std::string reason = rollout.state_reason();
  const size_t baking = reason.find("baking, ");
  if (baking != std::string::npos) {
    const size_t left = reason.find(" left", baking);
    if (left != std::string::npos) reason.erase(baking + 8, left - baking - 8);
  }
  rollout.set_state_reason(reason);
  return FormatRolloutProgress(rollout);
}

int Watch(const std::string& id, const ParsedArguments& arguments, CommandIo io) {
  absl::Duration interval = absl::Seconds(2);
  if (std::optional<std::string> text = arguments.Value("interval")) {
    if (!absl::ParseDuration(*text, &interval) || interval <= absl::ZeroDuration()) {
      return ReportError(kCommand,
                         absl::InvalidArgumentError(absl::StrCat(
                             "--interval=\"", *text, "\" must be a positive duration such as 2s or 500ms")),
                         io.err);
    }
  }
  absl::StatusOr<ViewOutput> parsed_format = ParseViewOutput(arguments.Value("output"));
  if (!parsed_format.ok()) return ReportError(kCommand, parsed_format.status(), io.err);
  const ViewOutput format = *parsed_format;
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(arguments);
  if (!connection.ok()) return ReportError(kCommand, connection.status(), io.err);
  // In place only on a terminal: a pipe or a log gets each change once.
  const bool in_place = &io.out == &std::cout && isatty(STDOUT_FILENO) == 1 &&
                        format == ViewOutput::kTable;
  interrupted = 0;
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  struct sigaction previous = {};
  sigaction(SIGINT, &action, &previous);
  std::string shown;
  int exit_code = kExitFailure;
  while (true) {
    std::unique_ptr<grpc::ClientContext> context = connection->NewContext();
    v1::GetRolloutRequest request;
    request.set_id(id);
    v1::Rollout rollout;
    const grpc::Status status = connection->stub().GetRollout(context.get(), request, &rollout);
    if (interrupted) {
      exit_code = kExitInterrupted;
      break;
    }
    if (!status.ok()) {
      exit_code = ReportServerError(
          kCommand, connection->CallStatus("GetRollout", status, *context), io.err);
      break;
    }
    std::string block;
    if (format != ViewOutput::kTable) {
      std::ostringstream document;
      if (absl::Status written = WriteMessage(rollout, format, document); !written.ok()) {
        exit_code = ReportError(kCommand, written, io.err);
        break;
      }
      block = document.str();
    } else {
      block = FormatRolloutProgress(rollout);
    }
    // On a terminal the countdown is redrawn; elsewhere it is no change.
    const std::string key = in_place ? block : ChangeKey(rollout);
    if (key != shown) {
      if (in_place) {
        io.out << "\033[H\033[2J";
      } else if (!shown.empty()) {
        io.out << "\n";
      }
      io.out << block;
      if (in_place) {
        io.out << "\n(every " << FormatSeconds(interval) << "; Ctrl-C to stop)\n";
      }
      io.out.flush();
      shown = key;
    }
    if (Settled(rollout.state())) {
      exit_code = rollout.state() == v1::ROLLOUT_STATE_COMPLETED ? kExitOk : kExitFailure;
      break;
    }
    // Short sleeps, so Ctrl-C ends the wait at once.
    const absl::Time wake = absl::Now() + interval;
    while (!interrupted && absl::Now() < wake) {
      absl::SleepFor(std::min(absl::Milliseconds(50), wake - absl::Now()));
    }
    if (interrupted) {
      exit_code = kExitInterrupted;
      break;
    }
  }
  sigaction(SIGINT, &previous, nullptr);
  return exit_code;
}

}  // namespace

int RunRolloutCommand(const std::vector<std::string>& args, CommandIo io) {
  if (args.empty() || args.front() == "--help" || args.front() == "-h" || args.front() == "help") {
    WriteHelp(args.empty() ? io.err : io.out);
    return args.empty() ? kExitUsage : kExitOk;
  }
  const ActionSpec* spec = nullptr;
  for (const ActionSpec& each : kActions) {
    if (each.name == args.front()) spec = &each;
  }
  if (spec == nullptr) {
    return ReportError(kCommand,
                       absl::InvalidArgumentError(absl::StrCat(
                           "unknown action '", args.front(),
                           "' (create, status, list, pause, resume, advance, abort, delete, promote)")),
                       io.err);
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  std::string id;
  if (spec->takes_id) {
    if (rest.empty() || rest.front().empty() || rest.front()[0] == '-') {
      return ReportError(kCommand,
                         absl::InvalidArgumentError(absl::StrCat(
                             "rollout ", spec->name, " needs the rollout ID as its first argument")),
                         io.err);
    }
    id = rest.front();
    rest.erase(rest.begin());
  }
  int exit_code = kExitOk;
  const std::optional<ParsedArguments> arguments =
      ParseFlags(kCommand, rest, RolloutFlags(spec->action), WriteHelp, io, &exit_code);
  if (!arguments.has_value()) return exit_code;
  if (spec->action == Action::kStatus && arguments->Has("watch")) {
    return Watch(id, *arguments, io);
  }
  if (spec->action == Action::kStatus && !arguments->Has("devices")) {
    for (const FlagSpec& flag : RolloutDeviceFlags()) {
      if (arguments->Has(flag.name)) {
        return ReportError(kCommand,
                           absl::InvalidArgumentError(absl::StrCat("--", flag.name,
                                                                   " applies to --devices only")),
                           io.err);
      }
    }
  }
  if (spec->action == Action::kPromote && arguments->Has("output")) {
    return ReportError(kCommand,
                       absl::InvalidArgumentError(
                           "-o/--output does not apply to promote: it prints policy YAML"),
                       io.err);
  }
  if (arguments->Has("interval")) {
    return ReportError(kCommand, absl::InvalidArgumentError("--interval applies to --watch only"),
                       io.err);
  }
  absl::Status done = Run(*spec, id, *arguments, io.out);
  if (!done.ok()) return ReportError(kCommand, done, io.err);
  return kExitOk;
}

}  // namespace weightpath::ctl
