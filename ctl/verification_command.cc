#include "ctl/verification_command.h"

#include "absl/strings/str_cat.h"
#include "ctl/rollout_client.h"
#include "ctl/admin_output.h"
#include "ctl/command_error.h"
#include "ctl/table_writer.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "verification";

const std::vector<FlagSpec>& VerificationFlags() {
  static const std::vector<FlagSpec> flags = [] {
    std::vector<FlagSpec> specs = {
        {"output", 'o', true, "table (default) or json"},
        {"help", 'h', false, "show this help"},
    };
    for (FlagSpec& spec : ConnectionFlags()) specs.push_back(std::move(spec));
    return specs;
  }();
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
  absl::StatusOr<ParsedArguments> arguments = ParseArguments(args, VerificationFlags());
  if (!arguments.ok()) return ReportError(kCommand, arguments.status(), io.err);
  if (arguments->Has("help")) {
    io.out << "usage: weightpathctl verification [-o table|json] --server ADDR\n\n"
           << FlagHelp(VerificationFlags());
    return kExitOk;
  }
  absl::StatusOr<AdminOutput> output = ParseAdminOutput(arguments->Value("output"));
  if (!output.ok()) return ReportError(kCommand, output.status(), io.err);
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(*arguments);
  if (!connection.ok()) return ReportError(kCommand, connection.status(), io.err);

  v1::GetVerificationMatrixResponse response;
  std::unique_ptr<grpc::ClientContext> context = connection->NewContext();
  absl::Status status = FromGrpc(
      connection->stub().GetVerificationMatrix(context.get(), v1::GetVerificationMatrixRequest(),
                                               &response),
      "GetVerificationMatrix");
  if (!status.ok()) return ReportError(kCommand, status, io.err);
  if (*output == AdminOutput::kJson) {
    absl::Status written = WriteJson(response, io.out);
    if (!written.ok()) return ReportError(kCommand, written, io.err);
  } else {
    WriteTable(response, io.out);
  }
  return kExitOk;
}

}  // namespace weightpath::ctl
