#include "ctl/paths_command.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/control_characters.h"
#include "google/protobuf/util/json_util.h"
#include "ctl/admin_query.h"
#include "ctl/command_error.h"
#include "ctl/explain_command.h"
#include "ctl/rollout_client.h"
#include "ctl/view_output.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "paths";

constexpr char kUsage[] =
    "usage: weightpathctl paths DEVICE_ID [flags]\n"
    "       weightpathctl paths --profile FILE [--labels k=v,...] [--priority speed|fidelity]\n"
    "                           [--model M] [flags]\n\n"
    "Every weight path of the server's policy for a registered device (the hardware\n"
    "profile, labels and priority it sent with its last resolve, as 'explain\n"
    "DEVICE_ID' evaluates them) or for the device a hardware profile describes\n"
    "(the prober's JSON), in three groups:\n"
    "  chosen        the policy's decision, and at which priorities (speed, fidelity)\n"
    "  compatible    could run here; says why another path is chosen instead\n"
    "  incompatible  names the rule and the hardware condition that excludes it\n"
    "and, for the model, in NVIDIA NIM's three groups: runnable; runnable but low\n"
    "on memory (the memory per GPU its full context needs, and the context that\n"
    "fits); incompatible (the requirement that fails), judged by the paths'\n"
    "`requires` and the catalog's model facts, with the engine arguments a\n"
    "decision for the path would carry on this device.\n"
    "Each with its verification evidence: whether it counts as verified and why,\n"
    "how many devices of this hardware class and CPU model reported it, their\n"
    "median decode tok/s, and the policy's expected figure for this CPU model.\n"
    "Only the policy is asked: a rollout may still shape what a device gets\n"
    "(see 'weightpathctl explain'). --priority picks the decision the answer's\n"
    "head shows; every path says the priorities it is chosen for either way.\n"
    "Nothing is recorded. -o json|yaml prints the whole ExplainDecision answer;\n"
    "this view is its `paths` field.";

std::string Figure(double tok_s) {
  // One decimal, as the policy writes its figures.
  return absl::StrCat(std::round(tok_s * 10) / 10, " tok/s");
}

std::string GiB(uint64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

}  // namespace

std::string EngineArgsWords(const google::protobuf::Struct& kwargs) {
  std::vector<std::string> words;
  for (const auto& [name, value] : kwargs.fields()) {
    std::string text;
    switch (value.kind_case()) {
      case google::protobuf::Value::kStringValue:
        text = value.string_value();
        break;
      case google::protobuf::Value::kNumberValue:
        text = absl::StrCat(value.number_value());
        break;
      case google::protobuf::Value::kBoolValue:
        text = value.bool_value() ? "true" : "false";
        break;
      default:
        (void)google::protobuf::util::MessageToJsonString(value, &text);
        break;
    }
    words.push_back(absl::StrCat(name, "=", text));
  }
  // The map's order is the protobuf runtime's; sorted, a line reads the same every time.
  std::sort(words.begin(), words.end());
  return words.empty() ? std::string("none") : absl::StrJoin(words, " ");
}

namespace {

// The memory and context half of a path's fit, in one phrase; empty when
// the server gave neither.
std::string MemoryWords(const v1::PathCandidate& path) {
  std::vector<std::string> parts;
  if (path.has_memory_per_gpu_bytes()) {
    std::string needs = absl::StrCat("needs ", GiB(path.memory_per_gpu_bytes()), " per GPU");
    if (path.has_memory_budget_per_gpu_bytes()) {
      absl::StrAppend(&needs, " of ", GiB(path.memory_budget_per_gpu_bytes()));
    }
    parts.push_back(std::move(needs));
  }
  if (path.has_max_model_len()) {
    parts.push_back(path.max_model_len() == 0
                        ? std::string("no context fits")
                        : absl::StrCat("a context of ", path.max_model_len(), " tokens fits"));
  }
  return absl::StrJoin(parts, "; ");
}

void WritePath(const v1::PathCandidate& path, std::ostream& out) {
  std::string head = path.path();
  if (path.standing() == v1::PathCandidate::STANDING_CHOSEN) {
    std::vector<std::string> priorities;
    for (const int priority : path.chosen_for()) {
      priorities.push_back(PriorityWord(static_cast<v1::Priority>(priority)));
    }
    absl::StrAppend(&head, "  for ", absl::StrJoin(priorities, " and "));
  }
  out << "  " << head << "\n";
  auto line = [&out](std::string_view label, const std::string& value) {
    std::string padded(label);
    padded.resize(12, ' ');
    out << "    " << padded << value << "\n";
  };
  line("why", path.reason());
  std::string fit = FitWord(path.fit());
  if (!path.failing_requirement().empty()) {
    absl::StrAppend(&fit, ": ", path.failing_requirement());
  }
  if (!path.fit_reason().empty() && path.failing_requirement() != "match") {
    absl::StrAppend(&fit, path.failing_requirement().empty() ? " (" : ": ", path.fit_reason(),
                    path.failing_requirement().empty() ? ")" : "");
  }
  line("fit", fit);
  if (const std::string memory = MemoryWords(path); !memory.empty()) line("memory", memory);
  if (path.standing() != v1::PathCandidate::STANDING_INCOMPATIBLE) {
    line("engine", EngineArgsWords(path.engine_kwargs()));
  }
  const v1::Verification& verification = path.verification();
  line("evidence", absl::StrCat(VerificationSourceWord(verification.source()),
                                verification.reason().empty() ? "" : ": ",
                                verification.reason()));
  // What the fleet measured beside what the policy expects, on one line.
  std::string fleet =
      path.devices_reported() == 0
          ? std::string("no device of this class and CPU model reported it")
          : absl::StrCat(Counted(path.devices_reported(), "device", "devices"),
                         " of this class and CPU model reported it");
  if (path.has_median_decode_tok_s()) {
    absl::StrAppend(&fleet, ": median ", Figure(path.median_decode_tok_s()), " decode");
  }
  absl::StrAppend(&fleet, path.has_expected_decode_tok_s()
                              ? absl::StrCat(path.has_median_decode_tok_s() ? ", expected " : "; expected ",
                                             Figure(path.expected_decode_tok_s()))
                              : std::string("; the policy has no decode figure for this CPU"));
  line("fleet", fleet);
}

void WriteTable(const v1::ExplainDecisionResponse& response, const std::string& subject,
                const std::string& cpu_model, std::ostream& out) {
  out << "paths for " << ControlEscaped(subject) << " (" << response.decision().hardware_class()
      << ", CPU " << (cpu_model.empty() ? std::string("-") : ControlEscaped(cpu_model)) << "), policy "
      << response.policy_version() << "\n";
  const struct {
    v1::PathCandidate::Standing standing;
    std::string_view title;
  } groups[] = {{v1::PathCandidate::STANDING_CHOSEN, "chosen"},
                {v1::PathCandidate::STANDING_COMPATIBLE, "compatible"},
                {v1::PathCandidate::STANDING_INCOMPATIBLE, "incompatible"}};
  for (const auto& group : groups) {
    const auto count = std::count_if(
        response.paths().begin(), response.paths().end(),
        [&](const v1::PathCandidate& path) { return path.standing() == group.standing; });
    out << "\n" << group.title << " (" << Counted(count, "path", "paths") << ")\n";
    for (const v1::PathCandidate& path : response.paths()) {
      if (path.standing() == group.standing) WritePath(path, out);
    }
  }
  out << "\nby fit for model " << (response.decision().model().empty() ? "-" : response.decision().model())
      << ", as NVIDIA NIM groups them\n";
  WriteFitGroups(response, "", out);
}

}  // namespace

std::string FitWord(v1::PathCandidate::Fit fit) {
  switch (fit) {
    case v1::PathCandidate::FIT_RUNNABLE:
      return "runnable";
    case v1::PathCandidate::FIT_LOW_MEMORY:
      return "low on memory";
    case v1::PathCandidate::FIT_INCOMPATIBLE:
      return "incompatible";
    default:
      return "not judged";
  }
}

void WriteFitGroups(const v1::ExplainDecisionResponse& response, std::string_view indent,
                    std::ostream& out) {
  const v1::PathCandidate::Fit fits[] = {
      v1::PathCandidate::FIT_RUNNABLE, v1::PathCandidate::FIT_LOW_MEMORY,
      v1::PathCandidate::FIT_INCOMPATIBLE, v1::PathCandidate::FIT_UNSPECIFIED};
  size_t width = 0;
  for (const v1::PathCandidate& path : response.paths()) width = std::max(width, path.path().size());
  for (const v1::PathCandidate::Fit fit : fits) {
    const auto count =
        std::count_if(response.paths().begin(), response.paths().end(),
                      [&](const v1::PathCandidate& path) { return path.fit() == fit; });
    if (count == 0 && fit == v1::PathCandidate::FIT_UNSPECIFIED) continue;
    out << indent << FitWord(fit) << " (" << Counted(count, "path", "paths") << ")\n";
    for (const v1::PathCandidate& path : response.paths()) {
      if (path.fit() != fit) continue;
      std::string name = path.path();
      name.resize(width + 2, ' ');
      std::string what;
      if (fit == v1::PathCandidate::FIT_INCOMPATIBLE) {
        what = path.failing_requirement() == "match"
                   ? absl::StrCat("match: ", path.reason())
                   : absl::StrCat(path.failing_requirement(), ": ", path.fit_reason());
      } else {
        what = MemoryWords(path);
        if (what.empty()) what = path.fit_reason().empty() ? "-" : path.fit_reason();
      }
      out << indent << "  " << name << ControlEscaped(what) << "\n";
    }
  }
}

int RunPathsCommand(const std::vector<std::string>& args, CommandIo io) {
  if (args.empty()) {
    return NoArguments(io.err, absl::StrCat(kUsage, "\n\n", FlagHelp(ExplainSubjectFlags())));
  }
  const ExplainSubject split = SplitExplainSubject(args);
  int exit_code = kExitOk;
  const std::optional<ParsedArguments> arguments = ParseFlags(
      kCommand, split.flags, ExplainSubjectFlags(),
      [](std::ostream& out) { out << kUsage << "\n\n" << FlagHelp(ExplainSubjectFlags()); }, io,
      &exit_code);
  if (!arguments.has_value()) return exit_code;
  absl::StatusOr<ViewOutput> output = ParseViewOutput(arguments->Value("output"));
  if (!output.ok()) return ReportError(kCommand, output.status(), io.err);
  absl::StatusOr<v1::ExplainDecisionRequest> request =
      ExplainSubjectRequest(split.device_id, *arguments);
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
  // The CPU the server evaluated (a server that predates `evaluated` sends
  // none; the request's own then, for a profile).
  const std::string& cpu_model = response->has_evaluated()
                                     ? response->evaluated().profile().cpu_model()
                                     : request->request().profile().cpu_model();
  WriteTable(*response, ExplainSubjectWords(split.device_id, *arguments), cpu_model, io.out);
  return kExitOk;
}

}  // namespace weightpath::ctl
