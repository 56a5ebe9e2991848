#include "ctl/policy_command.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/control_characters.h"
#include "common/proto_time.h"
#include "ctl/admin_query.h"
#include "ctl/rollout_plan.h"
#include "ctl/text_file.h"

namespace weightpath::ctl {
namespace {

constexpr char kUsage[] =
    "usage: weightpathctl policy plan --policy FILE [--since D] [--examples N]\n"
    "                                 [-o table|json|yaml] [flags]\n\n"
    "What the policy document FILE would change for the registered devices before\n"
    "it is loaded (PlanPolicy): the server loads it as a reload loads a policy\n"
    "(the catalog is not checked against it: a reload still does that), then\n"
    "evaluates every registered device (seen within --since, default all) on the\n"
    "hardware profile, labels and priority it last sent, by the policy it runs and\n"
    "by FILE, and lists the devices that would get another path: by hardware class,\n"
    "from which path to which, with up to --examples device ids (default 3, at\n"
    "most 20). Rollouts are left out: this is the policy's own change. Devices\n"
    "whose profile the registry does not hold (not seen since profiles were kept)\n"
    "are counted as not evaluated. Nothing is loaded or recorded. A document the\n"
    "server refuses exits 1 with its file:line and key.";

// The server's receive limit is 64 KiB a message; the rest of the request
// is a few bytes.
constexpr size_t kMaxPlannedPolicyBytes = 63 * 1024;

const std::vector<FlagSpec>& PlanFlags() {
  static const std::vector<FlagSpec> flags = ViewFlags({
      {"policy", '\0', true, "the candidate policy YAML (required)"},
      {"since", '\0', true, "only devices seen within this long (default: every device)"},
      {"examples", '\0', true, "example device ids per move (default 3, at most 20)"},
  });
  return flags;
}

absl::StatusOr<v1::PlanPolicyRequest> BuildRequest(const ParsedArguments& arguments) {
  v1::PlanPolicyRequest request;
  const std::optional<std::string> path = arguments.Value("policy");
  if (!path.has_value()) {
    return absl::InvalidArgumentError("--policy FILE is required (the candidate policy YAML)");
  }
  absl::StatusOr<std::string> text = ReadTextFile(*path);
  if (!text.ok()) return text.status();
  if (text->size() > kMaxPlannedPolicyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--policy ", *path, ": ", text->size(), " bytes; a plan sends at most ",
        kMaxPlannedPolicyBytes, " (the server's 64 KiB message limit)"));
  }
  request.set_policy_yaml(*std::move(text));
  request.set_source_name(*path);
  if (std::optional<std::string> since = arguments.Value("since")) {
    absl::StatusOr<absl::Duration> window = ParseSince(*since, "since");
    if (!window.ok()) return window.status();
    *request.mutable_seen_since() = ToProtoTime(absl::Now() - *window);
  }
  if (std::optional<std::string> examples = arguments.Value("examples")) {
    uint32_t count = 0;
    if (!absl::SimpleAtoi(*examples, &count) || count > 20) {
      return absl::InvalidArgumentError(
          absl::StrCat("--examples: '", *examples, "' is not a count from 0 to 20"));
    }
    request.set_examples(count);
  }
  return request;
}

void WriteTable(const v1::PlanPolicyResponse& response, std::ostream& out) {
  const uint64_t moving = MovedDevices(response);
  out << "policy " << response.current_policy_version() << " (served) -> "
      << response.planned_policy_version() << " (planned)\n";
  out << Counted(response.devices_evaluated(), "device", "devices") << " evaluated: "
      << response.devices_unchanged() << " unchanged, " << moving << " would move";
  if (response.devices_without_profile() > 0) {
    out << "; " << response.devices_without_profile()
        << " not evaluated (no profile kept, or one the served policy refuses)";
  }
  out << "\n";
  if (response.moves().empty()) return;
  out << "\n";
  WriteMoveTable(response, "", out);
}

}  // namespace

int RunPolicyCommand(const std::vector<std::string>& args, CommandIo io) {
  const std::string help = absl::StrCat(kUsage, "\n\n", FlagHelp(PlanFlags()));
  if (args.empty()) return NoArguments(io.err, help);
  if (args.front() == "--help" || args.front() == "-h" || args.front() == "help") {
    return ShowHelp(io.out, help);
  }
  if (args.front() != "plan") {
    return UsageError(io.err, "weightpathctl policy",
                      absl::StrCat("unknown action '", args.front(), "' (plan)"), kUsage);
  }
  const AdminQuery<v1::PlanPolicyRequest, v1::PlanPolicyResponse> query{
      "policy plan",
      kUsage,
      PlanFlags(),
      BuildRequest,
      [](FleetAdminConnection& connection, const v1::PlanPolicyRequest& request) {
        return CallFleetAdmin(connection, &v1::FleetAdmin::Stub::PlanPolicy, request, "PlanPolicy");
      },
      WriteTable,
  };
  return RunAdminQuery(query, std::vector<std::string>(args.begin() + 1, args.end()), io);
}

}  // namespace weightpath::ctl
