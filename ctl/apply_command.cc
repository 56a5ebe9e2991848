#include "ctl/apply_command.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctl/admin_query.h"
#include "ctl/command_error.h"
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
    "any rollout was refused or a call failed, after the others were applied.";

const std::vector<FlagSpec>& ApplyFlags() {
  static const std::vector<FlagSpec> flags = [] {
    std::vector<FlagSpec> all = {
        {"file", 'f', true, "a rollout YAML file, or a folder of them (required)"},
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
  int created = 0, updated = 0, unchanged = 0, refused = 0, failed = 0;
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
        ++unchanged;
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
          ++refused;
        } else {
          ++failed;
        }
        continue;
      }
      io.out << "rollout/" << id << " updated: " << absl::StrJoin(differing, ", ") << " ("
             << file.path << ")\n";
      ++updated;
      continue;
    }
    if (existing.status().code() != absl::StatusCode::kNotFound) {
      ReportServerError(kCommand, existing.status(), io.err);
      ++failed;
      continue;
    }
    v1::CreateRolloutRequest create;
    *create.mutable_rollout() = file.rollout;
    absl::StatusOr<v1::Rollout> made =
        CallFleetAdmin(*connection, &v1::FleetAdmin::Stub::CreateRollout, create, "CreateRollout");
    if (!made.ok()) {
      io.err << "weightpathctl apply: " << file.path << ": ";
      ReportServerError(kCommand, made.status(), io.err);
      ++failed;
      continue;
    }
    io.out << "rollout/" << id << " created (" << file.path << ")\n";
    ++created;
  }
  io.out << Counted(files.size(), "rollout", "rollouts") << ": " << created << " created, "
         << updated << " updated, " << unchanged << " unchanged, " << refused << " refused, "
         << failed << " failed\n";
  return refused + failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace weightpath::ctl
