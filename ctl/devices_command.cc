#include "ctl/devices_command.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ctl/rollout_client.h"
#include "ctl/admin_output.h"
#include "ctl/command_error.h"
#include "ctl/table_writer.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "devices";

const std::vector<FlagSpec>& DevicesFlags() {
  static const std::vector<FlagSpec> flags = [] {
    std::vector<FlagSpec> specs = {
        {"class", '\0', true, "only this hardware class (e.g. x86_cpu)"},
        {"path", '\0', true, "only devices served this weight path"},
        {"selector", '\0', true, "label selector, e.g. workload=agentic,site in (a,b)"},
        {"since", '\0', true, "only devices seen within this long (30m, 24h, 7d)"},
        {"output", 'o', true, "table (default) or json"},
        {"help", 'h', false, "show this help"},
    };
    for (FlagSpec& spec : ConnectionFlags()) specs.push_back(std::move(spec));
    return specs;
  }();
  return flags;
}

absl::StatusOr<v1::ListDevicesRequest> BuildRequest(const ParsedArguments& arguments) {
  v1::ListDevicesRequest request;
  request.set_hardware_class(arguments.Value("class").value_or(""));
  request.set_path(arguments.Value("path").value_or(""));
  request.set_label_selector(arguments.Value("selector").value_or(""));
  if (std::optional<std::string> since = arguments.Value("since")) {
    absl::StatusOr<absl::Duration> window = ParseSince(*since, "since");
    if (!window.ok()) return window.status();
    const absl::Time cutoff = absl::Now() - *window;
    request.mutable_seen_since()->set_seconds(absl::ToUnixSeconds(cutoff));
  }
  request.set_page_size(500);
  return request;
}

// Every page, in device id order.
absl::StatusOr<v1::ListDevicesResponse> ListAll(FleetAdminConnection& connection,
                                                v1::ListDevicesRequest request) {
  v1::ListDevicesResponse all;
  do {
    v1::ListDevicesResponse page;
    std::unique_ptr<grpc::ClientContext> context = connection.NewContext();
    absl::Status status = FromGrpc(connection.stub().ListDevices(context.get(), request, &page),
                                   "ListDevices");
    if (!status.ok()) return status;
    for (v1::Device& device : *page.mutable_devices()) *all.add_devices() = std::move(device);
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return all;
}

void WriteTable(const v1::ListDevicesResponse& response, std::ostream& out) {
  TableWriter table({"DEVICE", "CLASS", "PATH", "MODEL", "CPU", "LAST SEEN", "REGRESSIONS",
                     "LABELS"});
  for (const v1::Device& device : response.devices()) {
    table.AddRow({device.device_id(), device.hardware_class(), device.path(), device.model(),
                  device.profile().cpu_model().empty() ? "-" : device.profile().cpu_model(),
                  FormatTimestamp(device.last_seen()), absl::StrCat(device.regression_count()),
                  FormatLabels(device.labels())});
  }
  table.Write(out);
  out << response.devices_size() << (response.devices_size() == 1 ? " device\n" : " devices\n");
}

}  // namespace

int RunDevicesCommand(const std::vector<std::string>& args, CommandIo io) {
  absl::StatusOr<ParsedArguments> arguments = ParseArguments(args, DevicesFlags());
  if (!arguments.ok()) return ReportError(kCommand, arguments.status(), io.err);
  if (arguments->Has("help")) {
    io.out << "usage: weightpathctl devices [--class C] [--path P] [--selector S] [--since D]\n"
              "                             [-o table|json] --server ADDR [--token-file F | --ca C --cert F --key K]\n\n"
           << FlagHelp(DevicesFlags());
    return kExitOk;
  }
  absl::StatusOr<AdminOutput> output = ParseAdminOutput(arguments->Value("output"));
  if (!output.ok()) return ReportError(kCommand, output.status(), io.err);
  absl::StatusOr<v1::ListDevicesRequest> request = BuildRequest(*arguments);
  if (!request.ok()) return ReportError(kCommand, request.status(), io.err);
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(*arguments);
  if (!connection.ok()) return ReportError(kCommand, connection.status(), io.err);

  absl::StatusOr<v1::ListDevicesResponse> devices = ListAll(*connection, *std::move(request));
  if (!devices.ok()) return ReportError(kCommand, devices.status(), io.err);
  if (*output == AdminOutput::kJson) {
    absl::Status written = WriteJson(*devices, io.out);
    if (!written.ok()) return ReportError(kCommand, written, io.err);
  } else {
    WriteTable(*devices, io.out);
  }
  return kExitOk;
}

}  // namespace weightpath::ctl
