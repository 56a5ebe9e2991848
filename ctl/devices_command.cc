#include "ctl/devices_command.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "ctl/admin_query.h"
#include "ctl/table_writer.h"
#include "policy/hardware_class.h"

namespace weightpath::ctl {
namespace {

// "jetson, cuda_discrete, ...": the classes the policy library knows, so the
// help and the error list exactly what the server accepts.
std::string KnownHardwareClasses() {
  std::vector<std::string> known;
  for (policy::HardwareClass each : policy::kAllHardwareClasses) {
    known.emplace_back(policy::HardwareClassName(each));
  }
  return absl::StrJoin(known, ", ");
}

const std::vector<FlagSpec>& DevicesFlags() {
  static const std::vector<FlagSpec> flags = ViewFlags({
      {"class", '\0', true, absl::StrCat("only this hardware class: ", KnownHardwareClasses())},
      {"path", '\0', true, "only devices served this weight path"},
      {"selector", '\0', true, "label selector, e.g. workload=agentic,site in (a,b)"},
      {"since", '\0', true, "only devices seen within this long (30m, 24h, 7d)"},
      {"drift", '\0', false,
       "only devices that run another build than they are assigned (DRIFT says why and how "
       "long)"},
  });
  return flags;
}

// A typo is caught before the server is asked (which refuses it too).
absl::Status CheckHardwareClass(const std::string& name) {
  if (policy::ParseHardwareClass(name).ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--class '", name, "' is not a hardware class; one of: ", KnownHardwareClasses()));
}

absl::StatusOr<v1::ListDevicesRequest> BuildRequest(const ParsedArguments& arguments) {
  v1::ListDevicesRequest request;
  if (std::optional<std::string> hardware_class = arguments.Value("class")) {
    if (absl::Status known = CheckHardwareClass(*hardware_class); !known.ok()) return known;
    request.set_hardware_class(*hardware_class);
  }
  request.set_path(arguments.Value("path").value_or(""));
  request.set_label_selector(arguments.Value("selector").value_or(""));
  if (std::optional<std::string> since = arguments.Value("since")) {
    absl::StatusOr<absl::Duration> window = ParseSince(*since, "since");
    if (!window.ok()) return window.status();
    const absl::Time cutoff = absl::Now() - *window;
    request.mutable_seen_since()->set_seconds(absl::ToUnixSeconds(cutoff));
  }
  request.set_drifted_only(arguments.Has("drift"));
  request.set_page_size(500);
  return request;
}

// Every page, in device id order.
absl::StatusOr<v1::ListDevicesResponse> ListAll(FleetAdminConnection& connection,
                                                v1::ListDevicesRequest request) {
  v1::ListDevicesResponse all;
  do {
    absl::StatusOr<v1::ListDevicesResponse> page =
        CallFleetAdmin(connection, &v1::FleetAdmin::Stub::ListDevices, request, "ListDevices");
    if (!page.ok()) return page.status();
    for (v1::Device& device : *page->mutable_devices()) *all.add_devices() = std::move(device);
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  return all;
}

void WriteTable(const v1::ListDevicesResponse& response, std::ostream& out) {
  // PATH is the assignment; RUNNING what the device last said it runs.
  TableWriter table({"DEVICE", "CLASS", "PATH", "RUNNING", "DRIFT", "MODEL", "CPU", "LAST SEEN",
                     "REGRESSIONS", "LABELS"});
  const absl::Time now = absl::Now();
  for (const v1::Device& device : response.devices()) {
    table.AddRow({device.device_id(), device.hardware_class(), device.path(), RunningText(device),
                  DriftText(device, now), device.model(),
                  device.profile().cpu_model().empty() ? "-" : device.profile().cpu_model(),
                  FormatTimestamp(device.last_seen()), absl::StrCat(device.regression_count()),
                  FormatLabels(device.labels())});
  }
  table.Write(out);
  out << Counted(response.devices_size(), "device", "devices") << "\n";
}

}  // namespace

int RunDevicesCommand(const std::vector<std::string>& args, CommandIo io) {
  const AdminQuery<v1::ListDevicesRequest, v1::ListDevicesResponse> query{
      "devices",
      "usage: weightpathctl devices [--class C] [--path P] [--selector S] [--since D] [--drift]\n"
      "                             [-o table|json|yaml] [--server ADDR]\n"
      "                             [--token-file F | --ca C --cert F --key K]",
      DevicesFlags(),
      BuildRequest,
      ListAll,
      WriteTable,
  };
  return RunAdminQuery(query, args, io);
}

}  // namespace weightpath::ctl
