#include "ctl/verification_command.h"

#include "absl/strings/str_cat.h"
#include "ctl/admin_query.h"
#include "ctl/table_writer.h"

namespace weightpath::ctl {
namespace {

const std::vector<FlagSpec>& VerificationFlags() {
  static const std::vector<FlagSpec> flags = AdminQueryFlags({});
  return flags;
}

std::string SourceName(v1::Verification::Source source) {
  switch (source) {
    case v1::Verification::SOURCE_POLICY: return "policy";
    case v1::Verification::SOURCE_FLEET: return "fleet";
    case v1::Verification::SOURCE_NONE: return "none";
    case v1::Verification::SOURCE_UNAVAILABLE: return "unavailable";
    default: return "-";
  }
}

void WriteTable(const v1::GetVerificationMatrixResponse& response, std::ostream& out) {
  TableWriter table({"PATH", "CLASS", "CPU", "DEVICES", "DECODE TOK/S", "FIDELITY", "REGRESSIONS",
                     "VERIFIED", "WHY"});
  for (const v1::VerificationCell& cell : response.cells()) {
    table.AddRow({cell.path(), cell.hardware_class(), cell.cpu_model(),
                  absl::StrCat(cell.device_count()),
                  FormatFigure(cell.decode_tok_s().median(), cell.decode_tok_s().samples()),
                  cell.fidelity_prompts() == 0
                      ? "-"
                      : absl::StrCat(cell.fidelity_exact_matches(), "/", cell.fidelity_prompts()),
                  absl::StrCat(cell.regressions()), cell.verified() ? "yes" : "no",
                  absl::StrCat(SourceName(cell.verification().source()), ": ",
                               cell.verification().reason())});
  }
  table.Write(out);
  out << "policy " << response.policy_version() << "\n";
}

}  // namespace

int RunVerificationCommand(const std::vector<std::string>& args, CommandIo io) {
  const AdminQuery<v1::GetVerificationMatrixRequest, v1::GetVerificationMatrixResponse> query{
      "verification",
      "usage: weightpathctl verification [-o table|json] [--server ADDR]",
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
