#include "ctl/resolve_command.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/grpc_status.h"
#include "ctl/command_error.h"
#include "ctl/resolve_offline.h"
#include "ctl/resolve_output.h"
#include "ctl/rollout_client.h"
#include "ctl/text_file.h"
#include "policy/policy.h"
#include "policy/profile_json.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "resolve";

const std::vector<FlagSpec>& ResolveFlags() {
  static const std::vector<FlagSpec> flags = [] {
    std::vector<FlagSpec> all = {
      {"offline", '\0', false, "evaluate locally with the policy library, no server"},
      {"device-id", '\0', true,
       "resolve as this device: the server records it like the device's own resolve (without "
       "it: id weightpathctl, as a dry run)"},
      {"dry-run", '\0', false,
       "the server answers as usual but records nothing (the default without --device-id)"},
      {"model", '\0', true, "model to resolve for (default: the catalog's default)"},
      {"profile", '\0', true, "hardware profile JSON, as the prober writes it (required)"},
      {"priority", '\0', true, "speed (default) or fidelity"},
      {"policy", '\0', true, "policy YAML to use instead of the bundled default"},
      {"labels", '\0', true, "device labels, k=v,k2=v2"},
      {"output", 'o', true, "table (default), json or yaml"},
      {"help", 'h', false, "show this help"},
    };
    // --server ADDR and its TLS flags, shared with the other remote commands.
    for (FlagSpec& flag : ConnectionFlags()) {
      if (flag.name != "token-file") all.push_back(std::move(flag));
    }
    return all;
  }();
  return flags;
}

void WriteHelp(std::ostream& out) {
  out << "usage: weightpathctl resolve (--offline [--policy FILE] | [--server HOST:PORT]\n"
         "                             [--ca FILE] [--cert FILE --key FILE] [--device-id ID]\n"
         "                             [--dry-run] [--model NAME]) --profile FILE\n"
         "                             [--priority speed|fidelity] [--labels k=v,...] [-o json|text]\n\n"
         "Against a server, a resolve without --device-id is a dry run: the server answers\n"
         "exactly as it would answer a device, but records nothing, so trying a profile\n"
         "from a laptop adds no device to the fleet (ListDevices, summary, the\n"
         "devices-seen gauge). With --device-id ID the resolve counts as that device's\n"
         "own and updates its registry record, unless --dry-run is given too.\n\n"
      << FlagHelp(ResolveFlags());
}

// Everything resolve needs, read and validated before anything is decided.
struct ResolveInputs {
  v1::ResolveWeightPathRequest request;
  std::shared_ptr<const policy::Policy> policy;
  ViewOutput format = ViewOutput::kTable;
};

absl::StatusOr<ResolveInputs> ReadInputs(const ParsedArguments& arguments) {
  ResolveInputs inputs;
  std::optional<std::string> profile_path = arguments.Value("profile");
  if (!profile_path) {
    return absl::InvalidArgumentError("--profile FILE is required (a hardware profile JSON)");
  }
  absl::StatusOr<std::string> profile_text = ReadTextFile(*profile_path);
  if (!profile_text.ok()) return profile_text.status();
  absl::StatusOr<v1::HardwareProfile> profile =
      policy::ParseProfileJson(*profile_text, *profile_path);
  if (!profile.ok()) return profile.status();
  *inputs.request.mutable_profile() = *std::move(profile);

  if (std::optional<std::string> priority = arguments.Value("priority")) {
    absl::StatusOr<v1::Priority> parsed = policy::ParsePriority(*priority);
    if (!parsed.ok()) return parsed.status();
    inputs.request.set_priority(*parsed);
  }
  if (std::optional<std::string> labels = arguments.Value("labels")) {
    absl::StatusOr<policy::Labels> parsed = policy::ParseLabels(*labels);
    if (!parsed.ok()) return parsed.status();
    *inputs.request.mutable_labels() = *std::move(parsed);
  }
  absl::StatusOr<ViewOutput> format = ParseViewOutput(arguments.Value("output"));
  if (!format.ok()) return format.status();
  inputs.format = *format;
  if (std::optional<std::string> model = arguments.Value("model")) {
    inputs.request.set_model(*model);
  }
  const std::optional<std::string> device_id = arguments.Value("device-id");
  inputs.request.set_device_id(device_id.value_or("weightpathctl"));
  if (!arguments.Has("offline")) {
    if (arguments.Has("policy")) {
      return absl::InvalidArgumentError(
          "--policy applies to --offline only: the server decides with its own policy");
    }
    // An operator's resolve is not a device's unless it names one.
    inputs.request.set_dry_run(arguments.Has("dry-run") || !device_id.has_value());
    // To show what the server decides, whatever the build's shape; the
    // output says when it is a directory build.
    inputs.request.set_accepts_directory_builds(true);
    return inputs;
  }
  if (arguments.Has("dry-run")) {
    return absl::InvalidArgumentError(
        "--dry-run applies to a server's resolve: --offline never reaches a server, so there "
        "is nothing to keep from being recorded");
  }
  if (std::optional<std::string> policy_path = arguments.Value("policy")) {
    absl::StatusOr<std::string> policy_text = ReadTextFile(*policy_path);
    if (!policy_text.ok()) return policy_text.status();
    absl::StatusOr<std::shared_ptr<const policy::Policy>> loaded =
        policy::LoadPolicy(*policy_text, *policy_path);
    if (!loaded.ok()) return loaded.status();
    inputs.policy = *std::move(loaded);
  } else {
    inputs.policy = policy::DefaultPolicy();
  }
  return inputs;
}

// Asks weightpath-server, exactly as an agent would.
absl::StatusOr<v1::ResolveWeightPathResponse> ResolveRemotely(
    const ParsedArguments& arguments, const v1::ResolveWeightPathRequest& request) {
  absl::StatusOr<ClientSettings> settings = ResolveClientSettings(arguments, ProcessEnvironment());
  if (!settings.ok()) return settings.status();
  // A device call proves nothing with an operator token, so an unreadable
  // one configured for the admin commands must not stop a resolve.
  settings->token_file.reset();
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(arguments, *settings);
  if (!connection.ok()) return connection.status();
  std::unique_ptr<v1::WeightPath::Stub> stub = v1::WeightPath::NewStub(connection->channel());
  std::unique_ptr<grpc::ClientContext> context = connection->NewContext();
  v1::ResolveWeightPathResponse response;
  grpc::Status status = stub->ResolveWeightPath(context.get(), request, &response);
  if (!status.ok()) return connection->CallStatus("ResolveWeightPath", status, *context);
  return response;
}

}  // namespace

int RunResolveCommand(const std::vector<std::string>& args, CommandIo io) {
  int exit_code = kExitOk;
  const std::optional<ParsedArguments> arguments =
      ParseFlags(kCommand, args, ResolveFlags(), WriteHelp, io, &exit_code);
  if (!arguments.has_value()) return exit_code;
  // Remote unless --offline: the server comes from --server, the
  // environment, the config file or the default (ctl/client_config.h).
  const bool remote = !arguments->Has("offline");
  if (!remote && arguments->Has("server")) {
    return ReportError(kCommand,
                       absl::InvalidArgumentError("--server and --offline exclude each other"),
                       io.err);
  }
  absl::StatusOr<ResolveInputs> inputs = ReadInputs(*arguments);
  if (!inputs.ok()) return ReportError(kCommand, inputs.status(), io.err);
  absl::StatusOr<v1::ResolveWeightPathResponse> response =
      remote ? ResolveRemotely(*arguments, inputs->request)
             : ResolveOffline(*inputs->policy, inputs->request);
  if (!response.ok()) return ReportError(kCommand, response.status(), io.err);
  absl::Status written = WriteResolveResponse(*response, inputs->format, io.out);
  if (!written.ok()) return ReportError(kCommand, written, io.err);
  return kExitOk;
}

}  // namespace weightpath::ctl
