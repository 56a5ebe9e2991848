#include "ctl/summary_command.h"

#include <map>
#include <string>
#include <utility>

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
  // Assigned and running side by side, by class and path: a path some
  // devices are assigned and others run shows in both columns.
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> counts;
  for (const v1::FleetSummaryResponse::Cell& cell : response.cells()) {
    counts[{cell.hardware_class(), cell.path()}].first += cell.devices();
  }
  for (const v1::FleetSummaryResponse::Cell& cell : response.running_cells()) {
    counts[{cell.hardware_class(), cell.path()}].second += cell.devices();
  }
  TableWriter table({"CLASS", "PATH", "ASSIGNED", "RUNNING"});
  uint64_t running_total = 0;
  for (const auto& [key, count] : counts) {
    table.AddRow({key.first, key.second, absl::StrCat(count.first), absl::StrCat(count.second)});
    running_total += count.second;
  }
  table.AddRow({"TOTAL", "", absl::StrCat(response.total_devices()), absl::StrCat(running_total)});
  table.Write(out);
  out << Counted(response.drifted_devices(), "device runs", "devices run")
      << " another build than assigned (weightpathctl devices --drift)\n";
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
