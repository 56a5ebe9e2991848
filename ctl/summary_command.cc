#include "ctl/summary_command.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ctl/admin_query.h"
#include "ctl/table_writer.h"

namespace weightpath::ctl {
namespace {

const std::vector<FlagSpec>& SummaryFlags() {
  static const std::vector<FlagSpec> flags = ViewFlags({
      {"since", '\0', true, "count only devices seen within this long (default: all)"},
  });
  return flags;
}

absl::StatusOr<v1::FleetSummaryRequest> BuildRequest(const ParsedArguments& arguments) {
  v1::FleetSummaryRequest request;
  if (std::optional<std::string> since = arguments.Value("since")) {
    absl::StatusOr<absl::Duration> window = ParseSince(*since, "since");
    if (!window.ok()) return window.status();
    request.mutable_seen_since()->set_seconds(absl::ToUnixSeconds(absl::Now() - *window));
  }
  return request;
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
  const AdminQuery<v1::FleetSummaryRequest, v1::FleetSummaryResponse> query{
      "summary",
      "usage: weightpathctl summary [--since D] [-o table|json|yaml] [--server ADDR]",
      SummaryFlags(),
      BuildRequest,
      [](FleetAdminConnection& connection, const v1::FleetSummaryRequest& request) {
        return CallFleetAdmin(connection, &v1::FleetAdmin::Stub::FleetSummary, request,
                              "FleetSummary");
      },
      WriteTable,
  };
  return RunAdminQuery(query, args, io);
}

}  // namespace weightpath::ctl
