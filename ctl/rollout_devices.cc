#include "ctl/rollout_devices.h"

#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/control_characters.h"
#include "ctl/admin_output.h"
#include "ctl/table_writer.h"
#include "ctl/view_output.h"

namespace weightpath::ctl {
namespace {

// Flag name, the standing it selects.
constexpr std::pair<const char*, const char*> kFilters[] = {
    {"silent", "silent"},       {"failed", "failed"},       {"rolled-back", "rolled_back"},
    {"unreached", "unreached"}, {"pending", "pending"},
};

constexpr uint32_t kMaxPageSize = 1000;

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

std::string TimeOrDash(const google::protobuf::Timestamp& time, bool has) {
  return has ? FormatTimestamp(time) : "-";
}

std::string OutcomeName(v1::Outcome outcome) {
  if (outcome == v1::OUTCOME_UNSPECIFIED) return "-";
  std::string name = v1::Outcome_Name(outcome);
  constexpr absl::string_view kPrefix = "OUTCOME_";
  if (absl::StartsWith(name, kPrefix)) name = name.substr(kPrefix.size());
  return absl::AsciiStrToLower(name);
}

}  // namespace

std::vector<FlagSpec> RolloutDeviceFlags() {
  std::vector<FlagSpec> flags = {
      {"devices", '\0', false, "list each member: stage, first shaped resolve, last report, outcome"},
      {"page-size", '\0', true, "with --devices: members per page, 1..1000 (default 100)"},
      {"page-token", '\0', true, "with --devices: the page after the one that printed it"},
  };
  for (const auto& [flag, standing] : kFilters) {
    flags.push_back({flag, '\0', false,
                     absl::StrCat("with --devices: members that are ", standing,
                                  " (several filters: any of them)")});
  }
  return flags;
}

absl::StatusOr<v1::ListRolloutDevicesRequest> RolloutDevicesRequest(const std::string& id,
                                                                    const ParsedArguments& arguments) {
  v1::ListRolloutDevicesRequest request;
  request.set_id(id);
  for (const auto& [flag, standing] : kFilters) {
    if (arguments.Has(flag)) request.add_standings(standing);
  }
  if (std::optional<std::string> size = arguments.Value("page-size")) {
    uint32_t value = 0;
    if (!absl::SimpleAtoi(*size, &value) || value == 0 || value > kMaxPageSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("--page-size: '", *size, "' is not a whole number from 1 to ", kMaxPageSize));
    }
    request.set_page_size(value);
  }
  request.set_page_token(arguments.Value("page-token").value_or(""));
  return request;
}

std::string FormatRolloutDevices(const v1::ListRolloutDevicesResponse& response) {
  std::ostringstream out;
  TableWriter table({"DEVICE", "STAGE", "CLASS", "STANDING", "OUTCOME", "FIRST SHAPED RESOLVE",
                     "LAST REPORT", "LAST SEEN", "DETAIL"});
  for (const v1::RolloutDevice& device : response.devices()) {
    table.AddRow({device.device_id(), absl::StrCat(device.stage() + 1), device.hardware_class(),
                  device.standing(), OutcomeName(device.outcome()),
                  TimeOrDash(device.first_shaped_resolve(), device.has_first_shaped_resolve()),
                  TimeOrDash(device.last_report(), device.has_last_report()),
                  TimeOrDash(device.last_seen(), device.has_last_seen()),
                  OrDash(device.detail())});
  }
  table.Write(out);
  out << response.devices_size() << " of " << Counted(response.matched(), "member", "members")
      << " shown";
  if (!response.next_page_token().empty()) {
    std::string token;
    AppendControlEscaped(response.next_page_token(), &token);
    out << "; next page: --page-token " << token;
  }
  out << "\n";
  return out.str();
}

}  // namespace weightpath::ctl
