#include "ctl/verification_command.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ctl/admin_query.h"
#include "ctl/table_writer.h"

namespace weightpath::ctl {
namespace {

const std::vector<FlagSpec>& VerificationFlags() {
  static const std::vector<FlagSpec> flags = ViewFlags({});
  return flags;
}

// "by policy; 1 of 2 devices regressed": who vouches for the cell and, beside
// it, how many of the devices that reported regressed on their latest report
// (the cell counts every device, its verification the ones inside
// expectations), and ", 2 not judged" for those the policy has no figure to
// judge by (another CPU model or thread count).
std::string Verdict(const v1::VerificationCell& cell) {
  std::string who;
  switch (cell.verification().source()) {
    case v1::Verification::SOURCE_POLICY:
      who = "by policy";
      break;
    case v1::Verification::SOURCE_FLEET:
      who = cell.verified() ? "by fleet" : "no";
      break;
    case v1::Verification::SOURCE_UNAVAILABLE:
      who = "unknown: store unavailable";
      break;
    default:
      who = cell.verified() ? "yes" : "no";
      break;
  }
  if (cell.device_count() == 0) return absl::StrCat(who, "; no fleet reports");
  const uint32_t inside = std::min(cell.verification().device_count(), cell.device_count());
  return absl::StrCat(who, "; ", cell.device_count() - inside, " of ",
                      Counted(cell.device_count(), "device", "devices"), " regressed",
                      cell.not_judged() == 0 ? std::string()
                                             : absl::StrCat(", ", cell.not_judged(), " not judged"));
}

void WriteTable(const v1::GetVerificationMatrixResponse& response, std::ostream& out) {
  TableWriter table({"PATH", "CLASS", "CPU", "DEVICES", "DECODE TOK/S", "FIDELITY", "VERIFIED",
                     "WHY"});
  for (const v1::VerificationCell& cell : response.cells()) {
    table.AddRow({cell.path(), cell.hardware_class().empty() ? "any" : cell.hardware_class(),
                  cell.cpu_model().empty() ? "-" : cell.cpu_model(),
                  absl::StrCat(cell.device_count()),
                  FormatFigure(cell.decode_tok_s().median(), cell.decode_tok_s().samples()),
                  cell.fidelity_prompts() == 0
                      ? "-"
                      : absl::StrCat(cell.fidelity_exact_matches(), "/", cell.fidelity_prompts()),
                  Verdict(cell), cell.verification().reason()});
  }
  table.Write(out);
  out << Counted(response.cells_size(), "cell", "cells") << "; policy " << response.policy_version()
      << "\n";
}

}  // namespace

int RunVerificationCommand(const std::vector<std::string>& args, CommandIo io) {
  const AdminQuery<v1::GetVerificationMatrixRequest, v1::GetVerificationMatrixResponse> query{
      "verification",
      "usage: weightpathctl verification [-o table|json|yaml] [--server ADDR]\n\n"
      "One row per weight path, hardware class and CPU model: what the fleet\n"
      "measured (devices, median decode tok/s, fidelity exact matches) and who\n"
      "vouches for it: the policy (its verified paths are listed even before any\n"
      "device reports them) or the fleet, with the devices whose latest report\n"
      "regressed beside it, and those the policy has no expected figure to judge\n"
      "by (\"2 not judged\": another CPU model, after the policy's normalisation\n"
      "and cpu_model_aliases, or another thread count)",
      VerificationFlags(),
      [](const ParsedArguments&) { return v1::GetVerificationMatrixRequest(); },
      [](FleetAdminConnection& connection, const v1::GetVerificationMatrixRequest& request) {
        return CallFleetAdmin(connection, &v1::FleetAdmin::Stub::GetVerificationMatrix, request,
                              "GetVerificationMatrix");
      },
      WriteTable,
  };
  return RunAdminQuery(query, args, io);
}

}  // namespace weightpath::ctl
