#include "server/fleet/fleet_queries.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/field_violation.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "deploy/label_selector.h"
#include "policy/hardware_class.h"
#include "store/page_token.h"

namespace weightpath::server {
namespace {

// FleetSummaryResponse.running_cells' two paths that name no build.
constexpr char kNotReportedPath[] = "(not reported)";
constexpr char kNothingRunningPath[] = "(nothing running)";

absl::StatusOr<absl::Time> TimeFrom(const google::protobuf::Timestamp& timestamp,
                                    absl::string_view field) {
  // Before 1970 no device was seen: such a bound is a client's mistake.
  if (timestamp.seconds() < 0 || !IsValidProtoTime(timestamp)) {
    return InvalidArgumentForField(field, absl::StrCat(field, " is not a valid timestamp"));
  }
  return FromProtoTime(timestamp);
}

}  // namespace

absl::StatusOr<v1::ListDevicesResponse> FleetQueries::ListDevices(
    const v1::ListDevicesRequest& request) {
  store::DeviceQuery query;
  if (!request.hardware_class().empty()) {
    // A misspelt class would match nothing and look like an empty fleet.
    if (absl::Status known = policy::ParseHardwareClass(request.hardware_class()).status();
        !known.ok()) {
      return InvalidArgumentForField("hardware_class", known.message());
    }
  }
  query.hardware_class = request.hardware_class();
  query.path = request.path();
  if (request.has_seen_since()) {
    ASSIGN_OR_RETURN(query.seen_since, TimeFrom(request.seen_since(), "seen_since"));
  }
  if (!request.label_selector().empty()) {
    absl::StatusOr<v1::DeviceSelector> selector = deploy::ParseLabelSelector(request.label_selector());
    if (!selector.ok()) {
      return InvalidArgumentForField(
          "label_selector", absl::StrCat("label_selector: ", selector.status().message()));
    }
    query.label_predicate = [selector = *std::move(selector)](const store::DeviceLabels& labels) {
      return deploy::MatchesLabels(selector, labels);
    };
  }
  query.page_size = request.page_size();
  query.page_token = request.page_token();
  query.drifted_only = request.drifted_only();
  ASSIGN_OR_RETURN(store::DevicePage page, fleet_->store().ListDevices(query));
  v1::ListDevicesResponse response;
  for (v1::Device& device : page.devices) *response.add_devices() = std::move(device);
  response.set_next_page_token(page.next_page_token);
  return response;
}

absl::StatusOr<v1::Device> FleetQueries::GetDevice(const v1::GetDeviceRequest& request) {
  if (request.device_id().empty()) return InvalidArgumentForField("device_id", "device_id is required");
  ASSIGN_OR_RETURN(v1::Device device, fleet_->store().GetDevice(request.device_id()));
  ASSIGN_OR_RETURN(store::DeviceReports reports,
                   fleet_->store().RecentDeviceReports(request.device_id(),
                                                       store::kRecentDeviceReports));
  for (v1::DeviceMeasurement& m : reports.measurements) {
    *device.add_recent_measurements() = std::move(m);
  }
  for (v1::DeviceOutcome& o : reports.outcomes) *device.add_recent_outcomes() = std::move(o);
  return device;
}

absl::StatusOr<v1::FleetSummaryResponse> FleetQueries::FleetSummary(
    const v1::FleetSummaryRequest& request) {
  absl::Time since = absl::InfinitePast();
  if (request.has_seen_since()) {
    ASSIGN_OR_RETURN(since, TimeFrom(request.seen_since(), "seen_since"));
  }
  ASSIGN_OR_RETURN(v1::FleetSummaryResponse summary, fleet_->store().FleetSummary(since));
  // Persistence is the metric's business; a summary counts every drift.
  ASSIGN_OR_RETURN(store::RunningCounts running,
                   fleet_->store().CountRunning(since, absl::InfinitePast()));
  // Devices that have not said what they run: the rest of each class.
  std::map<std::pair<std::string, std::string>, uint64_t> by_running_path;
  for (const auto& [key, devices] : running.by_class_and_running_path) {
    by_running_path[{key.first, key.second.empty() ? kNothingRunningPath : key.second}] += devices;
  }
  std::map<std::string, uint64_t> reported;
  for (const auto& [key, devices] : running.by_class_and_running_path) {
    reported[key.first] += devices;
  }
  std::map<std::string, uint64_t> seen;
  for (const v1::FleetSummaryResponse::Cell& cell : summary.cells()) {
    seen[cell.hardware_class()] += cell.devices();
  }
  for (const auto& [hardware_class, devices] : seen) {
    // Two reads, not one snapshot: a device first seen between them is not
    // let to make the rest negative.
    const uint64_t said = reported[hardware_class];
    if (devices > said) by_running_path[{hardware_class, kNotReportedPath}] += devices - said;
  }
  for (const auto& [key, devices] : by_running_path) {
    v1::FleetSummaryResponse::Cell* cell = summary.add_running_cells();
    cell->set_hardware_class(key.first);
    cell->set_path(key.second);
    cell->set_devices(devices);
  }
  uint64_t drifted = 0;
  for (const auto& [key, count] : running.drifted) drifted += count.devices;
  summary.set_drifted_devices(drifted);
  return summary;
}

absl::StatusOr<v1::GetVerificationMatrixResponse> FleetQueries::VerificationMatrix() {
  return fleet_->VerificationMatrix();
}

absl::StatusOr<v1::ListAuditEventsResponse> FleetQueries::ListAuditEvents(
    const v1::ListAuditEventsRequest& request) {
  if (request.limit() > store::kMaxAuditLimit) {
    return InvalidArgumentForField(
        "limit", absl::StrCat("limit = ", request.limit(), " is above the maximum ",
                              store::kMaxAuditLimit, " (0 means ", store::kDefaultAuditLimit, ")"));
  }
  absl::Time since = absl::InfinitePast();
  if (request.has_since()) {
    ASSIGN_OR_RETURN(since, TimeFrom(request.since(), "since"));
  }
  store::AuditPageRequest page;
  page.max_bytes = kMaxAuditPageBytes;
  if (!request.page_token().empty()) {
    absl::StatusOr<store::AuditCursor> before = store::DecodeAuditPageToken(request.page_token());
    if (!before.ok()) return InvalidArgumentForField("page_token", before.status().message());
    page.before = *before;
  }
  ASSIGN_OR_RETURN(store::AuditEventList list,
                   fleet_->store().ListAuditEvents(since, request.limit(), page));
  v1::ListAuditEventsResponse response;
  for (v1::AuditEvent& event : list.events) *response.add_events() = std::move(event);
  response.set_truncated(list.truncated);
  if (list.oldest.has_value()) response.set_next_page_token(store::EncodeAuditPageToken(*list.oldest));
  return response;
}

absl::Status FleetQueries::RecordAuditEvent(const v1::AuditEvent& event) {
  return fleet_->RecordAuditEvent(event);
}

}  // namespace weightpath::server
