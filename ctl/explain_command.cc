#include "ctl/explain_command.h"

#include <optional>

#include "common/control_characters.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ctl/admin_output.h"
#include "ctl/admin_query.h"
#include "ctl/command_error.h"
#include "ctl/paths_command.h"
#include "ctl/rollout_view.h"
#include "ctl/text_file.h"
#include "ctl/resolve_output.h"
#include "ctl/view_output.h"
#include "deploy/stage_plan.h"
#include "policy/profile_json.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "explain";

constexpr char kUsage[] =
    "usage: weightpathctl explain DEVICE_ID [flags]\n"
    "       weightpathctl explain --profile FILE [--labels k=v,...] [--priority speed|fidelity]\n"
    "                             [--model M] [flags]\n\n"
    "Asks the server why it decides what it decides (ExplainDecision), without\n"
    "recording anything: the rules in evaluation order and which matched, the\n"
    "rollout and bucket that shaped the decision with its state and each gate's\n"
    "verdict, statistic and member/control counts per hardware class, the\n"
    "verification evidence, every path of the policy in NVIDIA NIM's groups\n"
    "(runnable; low on memory, with the memory per GPU needed and the context\n"
    "that fits; incompatible, with the failing requirement) and the policy\n"
    "version. DEVICE_ID evaluates the hardware profile, labels and priority the\n"
    "device sent with its last resolve, as the registry keeps them (a device not\n"
    "seen since profiles were kept: its profile summary, and the answer says so);\n"
    "--profile evaluates a full hardware profile JSON as the prober writes it.";

absl::StatusOr<v1::ExplainDecisionRequest> ProfileRequest(const std::string& profile_path,
                                                          const ParsedArguments& arguments) {
  v1::ExplainDecisionRequest request;
  v1::ResolveWeightPathRequest* subject = request.mutable_request();
  absl::StatusOr<std::string> text = ReadTextFile(profile_path);
  if (!text.ok()) return text.status();
  absl::StatusOr<v1::HardwareProfile> profile = policy::ParseProfileJson(*text, profile_path);
  if (!profile.ok()) return profile.status();
  *subject->mutable_profile() = *std::move(profile);
  subject->set_priority(v1::PRIORITY_SPEED);
  if (std::optional<std::string> priority = arguments.Value("priority")) {
    absl::StatusOr<v1::Priority> parsed = policy::ParsePriority(*priority);
    if (!parsed.ok()) return parsed.status();
    subject->set_priority(*parsed);
  }
  if (std::optional<std::string> labels = arguments.Value("labels")) {
    absl::StatusOr<policy::Labels> parsed = policy::ParseLabels(*labels);
    if (!parsed.ok()) return parsed.status();
    *subject->mutable_labels() = *std::move(parsed);
  }
  subject->set_model(arguments.ValueOr("model", ""));
  // ExplainDecision records nothing; the id only has to be well-formed.
  subject->set_device_id("weightpathctl-explain");
  return request;
}

void Line(std::ostream& out, std::string_view label, const std::string& value) {
  std::string padded(label);
  padded.resize(std::max<size_t>(padded.size() + 2, 18), ' ');
  out << "  " << padded << ControlEscaped(value) << "\n";
}

void WriteTable(const v1::ExplainDecisionResponse& response, std::string_view subject,
                std::optional<int> rollout_stages, std::ostream& out) {
  const v1::ResolveWeightPathResponse& decision = response.decision();
  const v1::WeightPathSpec& path = decision.weight_path();
  out << "decision for " << subject << "\n";
  Line(out, "hardware class", decision.hardware_class());
  Line(out, "weight path", absl::StrCat(path.name(), "  (policy path ", path.path_id(), ")"));
  Line(out, "priority", PriorityWord(decision.effective_priority()));
  Line(out, "model", decision.model().empty() ? "-" : decision.model());
  Line(out, "matched rule", decision.matched_rule().empty() ? "-" : decision.matched_rule());
  for (const v1::PathCandidate& candidate : response.paths()) {
    if (candidate.path() != path.path_id()) continue;
    Line(out, "fit", candidate.failing_requirement().empty()
                         ? FitWord(candidate.fit())
                         : absl::StrCat(FitWord(candidate.fit()), ": ",
                                        candidate.failing_requirement()));
  }
  Line(out, "engine args", EngineArgsWords(decision.engine_kwargs()));
  Line(out, "artifact", ArtifactSummary(decision.artifact()));

  out << "rollout\n";
  const v1::RolloutAttribution& rollout = response.rollout();
  if (rollout.rollout_id().empty()) {
    Line(out, "shaped by", "no rollout");
  } else {
    Line(out, "shaped by", rollout.rollout_id());
    Line(out, "bucket", absl::StrCat(rollout.bucket(), " of 0..9999"));
    Line(out, "stage",
         rollout_stages.has_value()
             ? absl::StrCat(rollout.stage() + 1, " of ", *rollout_stages)
             : absl::StrCat(rollout.stage() + 1));
  }
  if (response.rollouts_considered_size() == 0) {
    Line(out, "considered", "no rollouts");
  } else {
    for (const std::string& line : response.rollouts_considered()) Line(out, "considered", line);
  }
  if (response.has_rollout_detail()) {
    const v1::Rollout& detail = response.rollout_detail();
    Line(out, "state", detail.state_reason().empty()
                           ? RolloutStateName(detail.state())
                           : absl::StrCat(RolloutStateName(detail.state()), " (",
                                          detail.state_reason(), ")"));
    // What each stage can catch: the smallest increase its fail test finds
    // with 80% probability by its horizon.
    for (const v1::StagePlan& plan : detail.stage_plans()) {
      Line(out, "planned power", deploy::DescribeStagePlan(plan));
    }
    out << "rollout gates (at the last evaluation)\n";
    for (absl::string_view line : absl::StrSplit(FormatGateTable(detail), '\n', absl::SkipEmpty())) {
      out << "  " << line << "\n";
    }
  }

  out << "rules tried (" << Counted(response.rule_trace_size(), "line", "lines")
      << ", in evaluation order)\n";
  for (const std::string& line : response.rule_trace()) out << "  " << line << "\n";

  out << "verification\n";
  const v1::Verification& verification = response.verification();
  Line(out, "verified", path.verified() ? "yes" : "no, measure before trusting it");
  Line(out, "evidence", VerificationSourceWord(verification.source()));
  if (verification.source() == v1::Verification::SOURCE_FLEET) {
    Line(out, "devices", Counted(verification.device_count(), "device", "devices"));
  }
  if (!verification.reason().empty()) Line(out, "reason", verification.reason());
  for (const v1::ExpectedFigures& expected : path.expected()) {
    std::string figure = absl::StrCat(expected.cpu_model(), " at ",
                                      Counted(expected.threads(), "thread", "threads"));
    if (expected.has_decode_tok_s()) absl::StrAppend(&figure, ": ", expected.decode_tok_s(), " tok/s decode");
    Line(out, "expected", figure);
  }

  if (response.paths_size() > 0) {
    out << "paths for model " << (decision.model().empty() ? "-" : decision.model())
        << ", as NVIDIA NIM groups them\n";
    WriteFitGroups(response, "  ", out);
  }

  out << "policy\n";
  Line(out, "version", response.policy_version());
  Line(out, "evaluated at", FormatTimestamp(response.evaluated_at()));
}

}  // namespace

ExplainSubject SplitExplainSubject(const std::vector<std::string>& args) {
  ExplainSubject subject;
  subject.flags = args;
  if (!args.empty() && !args.front().empty() && args.front()[0] != '-') {
    subject.device_id = args.front();
    subject.flags.erase(subject.flags.begin());
  }
  return subject;
}

const std::vector<FlagSpec>& ExplainSubjectFlags() {
  static const std::vector<FlagSpec> flags = ViewFlags({
      {"profile", '\0', true, "hardware profile JSON to evaluate instead of a registered device"},
      {"labels", '\0', true, "device labels with --profile, k=v,k2=v2"},
      {"priority", '\0', true, "with --profile: speed (default) or fidelity"},
      {"model", '\0', true, "with --profile: the model (default: the catalog's default)"},
  });
  return flags;
}

absl::StatusOr<v1::ExplainDecisionRequest> ExplainSubjectRequest(
    const std::optional<std::string>& device_id, const ParsedArguments& arguments) {
  const std::optional<std::string> profile_path = arguments.Value("profile");
  if (device_id.has_value() == profile_path.has_value()) {
    return absl::InvalidArgumentError(
        device_id.has_value() ? "give DEVICE_ID or --profile FILE, not both"
                              : "needs DEVICE_ID or --profile FILE");
  }
  if (!device_id.has_value()) return ProfileRequest(*profile_path, arguments);
  for (const char* flag : {"labels", "priority", "model"}) {
    if (arguments.Has(flag)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " applies to --profile only: a registered device is evaluated on the "
                      "profile, labels and priority it last sent and the model it was given"));
    }
  }
  v1::ExplainDecisionRequest request;
  request.set_device_id(*device_id);
  return request;
}

std::string ExplainSubjectWords(const std::optional<std::string>& device_id,
                                const ParsedArguments& arguments) {
  return device_id.has_value() ? absl::StrCat("device ", *device_id)
                               : absl::StrCat("profile ", arguments.ValueOr("profile", ""));
}

std::string VerificationSourceWord(v1::Verification::Source source) {
  switch (source) {
    case v1::Verification::SOURCE_POLICY:
      return "policy";
    case v1::Verification::SOURCE_FLEET:
      return "fleet";
    case v1::Verification::SOURCE_NONE:
      return "none";
    case v1::Verification::SOURCE_UNAVAILABLE:
      return "unavailable (the fleet store could not be read)";
    default:
      return "unspecified";
  }
}

int RunExplainCommand(const std::vector<std::string>& args, CommandIo io) {
  if (args.empty()) {
    return NoArguments(io.err, absl::StrCat(kUsage, "\n\n", FlagHelp(ExplainSubjectFlags())));
  }
  const ExplainSubject split = SplitExplainSubject(args);
  const std::optional<std::string>& device_id = split.device_id;
  int exit_code = kExitOk;
  const std::optional<ParsedArguments> arguments = ParseFlags(
      kCommand, split.flags, ExplainSubjectFlags(),
      [](std::ostream& out) { out << kUsage << "\n\n" << FlagHelp(ExplainSubjectFlags()); }, io,
      &exit_code);
  if (!arguments.has_value()) return exit_code;
  absl::StatusOr<ViewOutput> output = ParseViewOutput(arguments->Value("output"));
  if (!output.ok()) return ReportError(kCommand, output.status(), io.err);
  absl::StatusOr<v1::ExplainDecisionRequest> request = ExplainSubjectRequest(device_id, *arguments);
  if (!request.ok()) {
    ReportError(kCommand, request.status(), io.err);
    return kExitUsage;
  }
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(*arguments);
  if (!connection.ok()) return ReportError(kCommand, connection.status(), io.err);
  absl::StatusOr<v1::ExplainDecisionResponse> response = CallFleetAdmin(
      *connection, &v1::FleetAdmin::Stub::ExplainDecision, *request, "ExplainDecision");
  if (!response.ok()) return ReportServerError(kCommand, response.status(), io.err);
  if (*output != ViewOutput::kTable) {
    absl::Status written = WriteMessage(*response, *output, io.out);
    if (!written.ok()) return ReportError(kCommand, written, io.err);
    return kExitOk;
  }
  // "stage k of n" needs the rollout's stage count: in rollout_detail, or
  // from GetRollout for a server that predates it; without it the stage
  // still shows, 1-based.
  std::optional<int> rollout_stages;
  if (response->has_rollout_detail()) {
    rollout_stages = response->rollout_detail().stages_size();
  } else if (!response->rollout().rollout_id().empty()) {
    v1::GetRolloutRequest get;
    get.set_id(response->rollout().rollout_id());
    absl::StatusOr<v1::Rollout> rollout =
        CallFleetAdmin(*connection, &v1::FleetAdmin::Stub::GetRollout, get, "GetRollout");
    if (rollout.ok()) rollout_stages = rollout->stages_size();
  }
  WriteTable(*response, ExplainSubjectWords(device_id, *arguments), rollout_stages, io.out);
  return kExitOk;
}

}  // namespace weightpath::ctl
