#include "ctl/summary_command.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ctl/rollout_client.h"
#include "ctl/admin_output.h"
#include "ctl/command_error.h"
#include "ctl/table_writer.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "summary";

const std::vector<FlagSpec>& SummaryFlags() {
  static const std::vector<FlagSpec> flags = [] {
    std::vector<FlagSpec> specs = {
        {"since", '\0', true, "count only devices seen within this long (default: all)"},
        {"output", 'o', true, "table (default) or json"},
        {"help", 'h', false, "show this help"},
    };
    for (FlagSpec& spec : ConnectionFlags()) specs.push_back(std::move(spec));
    return specs;
  }();
  return flags;
}

void WriteTable(const v1::FleetSummaryResponse& response, std::ostream& out) {
  TableWriter table({"CLASS", "PATH", "DEVICES"});
  for (const v1::FleetSummaryResponse::Cell& cell : response.cells()) {
    table.AddRow({cell.hardware_class(), cell.path(), absl::StrCat(cell.devices())});
  }
  table.AddRow({"TOTAL", "", absl::StrCat(response.total_devices())});
  table.Write(out);
}

}  // namespace

int RunSummaryCommand(const std::vector<std::string>& args, CommandIo io) {
  absl::StatusOr<ParsedArguments> arguments = ParseArguments(args, SummaryFlags());
  if (!arguments.ok()) return ReportError(kCommand, arguments.status(), io.err);
  if (arguments->Has("help")) {
    io.out << "usage: weightpathctl summary [--since D] [-o table|json] --server ADDR\n\n"
           << FlagHelp(SummaryFlags());
    return kExitOk;
  }
  absl::StatusOr<AdminOutput> output = ParseAdminOutput(arguments->Value("output"));
  if (!output.ok()) return ReportError(kCommand, output.status(), io.err);
  v1::FleetSummaryRequest request;
  if (std::optional<std::string> since = arguments->Value("since")) {
    absl::StatusOr<absl::Duration> window = ParseSince(*since, "since");
    if (!window.ok()) return ReportError(kCommand, window.status(), io.err);
    request.mutable_seen_since()->set_seconds(absl::ToUnixSeconds(absl::Now() - *window));
  }
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(*arguments);
  if (!connection.ok()) return ReportError(kCommand, connection.status(), io.err);

  v1::FleetSummaryResponse response;
  std::unique_ptr<grpc::ClientContext> context = connection->NewContext();
  absl::Status status = FromGrpc(
      connection->stub().FleetSummary(context.get(), request, &response), "FleetSummary");
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
