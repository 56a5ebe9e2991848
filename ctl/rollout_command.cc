#include "ctl/rollout_command.h"

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/grpc_status.h"
#include "ctl/command_error.h"
#include "ctl/resolve_output.h"
#include "ctl/rollout_client.h"
#include "ctl/rollout_view.h"
#include "ctl/rollout_yaml.h"
#include "ctl/text_file.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "rollout";

enum class Action { kCreate, kStatus, kList, kPause, kResume, kAdvance, kAbort };

struct ActionSpec {
  absl::string_view name;
  Action action;
  bool takes_id;
};

constexpr ActionSpec kActions[] = {
    {"create", Action::kCreate, false}, {"status", Action::kStatus, true},
    {"list", Action::kList, false},     {"pause", Action::kPause, true},
    {"resume", Action::kResume, true},  {"advance", Action::kAdvance, true},
    {"abort", Action::kAbort, true},
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
  flags.push_back({"output", 'o', true, "text (default) or json"});
  flags.push_back({"help", 'h', false, "show this help"});
  return flags;
}

void WriteHelp(std::ostream& out) {
  out << "usage: weightpathctl rollout create -f rollout.yaml [flags]\n"
         "       weightpathctl rollout status|pause|resume|advance|abort ID [flags]\n"
         "       weightpathctl rollout list [flags]\n\n"
         "status shows the progress view: stage k/n and percent, members and how many\n"
         "report, outcomes of members against the control group, gate readings, state\n"
         "and reason. pause/resume/advance/abort print the rollout after the change.\n\n"
      << FlagHelp(RolloutFlags(Action::kCreate))
      << "  --reason TEXT   (pause, resume, advance, abort) why, kept as the state reason\n";
}

absl::Status PrintRollout(const v1::Rollout& rollout, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kJson) {
    absl::StatusOr<std::string> json = RolloutJson(rollout);
    if (!json.ok()) return json.status();
    out << *json;
    return absl::OkStatus();
  }
  out << FormatRolloutProgress(rollout);
  return absl::OkStatus();
}

absl::Status Run(const ActionSpec& spec, const std::string& id, const ParsedArguments& arguments,
                 std::ostream& out) {
  OutputFormat format = OutputFormat::kText;
  if (std::optional<std::string> text = arguments.Value("output")) {
    absl::StatusOr<OutputFormat> parsed = ParseOutputFormat(*text);
    if (!parsed.ok()) return parsed.status();
    format = *parsed;
  }
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
      rpc = "GetRollout";
      v1::GetRolloutRequest request;
      request.set_id(id);
      status = connection->stub().GetRollout(context.get(), request, &rollout);
      break;
    }
    case Action::kList: {
      v1::ListRolloutsResponse response;
      status = connection->stub().ListRollouts(context.get(), v1::ListRolloutsRequest(), &response);
      if (!status.ok()) return FromGrpcStatus("ListRollouts", status, *context);
      if (format == OutputFormat::kJson) {
        absl::StatusOr<std::string> json = RolloutJson(response);
        if (!json.ok()) return json.status();
        out << *json;
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
  }
  if (!status.ok()) return FromGrpcStatus(rpc, status, *context);
  return PrintRollout(rollout, format, out);
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
                           "' (create, status, list, pause, resume, advance, abort)")),
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
  absl::Status done = Run(*spec, id, *arguments, io.out);
  if (!done.ok()) return ReportError(kCommand, done, io.err);
  return kExitOk;
}

}  // namespace weightpath::ctl
