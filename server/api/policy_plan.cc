#include "server/api/policy_plan.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/field_violation.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "server/api/rollout_explain.h"
#include "server/resolve/request_validation.h"

namespace weightpath::server {
namespace {

// (hardware class, from, to, refusal): one row of the plan.
using MoveKey = std::tuple<std::string, std::string, std::string, std::string>;

struct MoveCount {
  uint64_t devices = 0;
  std::vector<std::string> examples;
};

absl::Status CheckRequest(const v1::PlanPolicyRequest& request) {
  if (request.policy_yaml().empty()) {
    return InvalidArgumentForField("policy_yaml", "policy_yaml: the candidate policy document is empty");
  }
  if (request.source_name().size() > kMaxPlanSourceNameBytes) {
    return InvalidArgumentForField(
        "source_name", absl::StrCat("source_name: ", request.source_name().size(),
                                    " bytes; at most ", kMaxPlanSourceNameBytes));
  }
  for (unsigned char c : request.source_name()) {
    if (c < 0x20 || c == 0x7f) {
      return InvalidArgumentForField("source_name", "source_name: holds a control character");
    }
  }
  if (request.examples() > kMaxPlanExamples) {
    return InvalidArgumentForField("examples", absl::StrCat("examples: ", request.examples(),
                                                            "; at most ", kMaxPlanExamples));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::PlanPolicyResponse> PlanPolicy(const v1::PlanPolicyRequest& request,
                                                  const policy::Policy& current,
                                                  store::FleetStore& store, absl::Time now) {
  RETURN_IF_ERROR(CheckRequest(request));
  const std::string source =
      request.source_name().empty() ? std::string("request") : request.source_name();
  absl::StatusOr<std::shared_ptr<const policy::Policy>> candidate =
      policy::LoadPolicy(request.policy_yaml(), source);
  if (!candidate.ok()) {
    return InvalidArgumentForField("policy_yaml",
                                   absl::StrCat("policy_yaml: ", candidate.status().message()));
  }
  const uint32_t examples = request.examples() == 0 ? kDefaultPlanExamples : request.examples();

  v1::PlanPolicyResponse response;
  response.set_current_policy_version(current.version());
  response.set_planned_policy_version((*candidate)->version());
  std::map<MoveKey, MoveCount> moves;
  store::DeviceQuery query;
  query.with_profiles = true;
  query.page_size = store::kMaxPageSize;
  if (request.has_seen_since()) query.seen_since = FromProtoTime(request.seen_since());
  while (true) {
    ASSIGN_OR_RETURN(store::DevicePage page, store.ListDevices(query));
    for (const v1::Device& device : page.devices) {
      if (!device.has_hardware_profile()) {
        response.set_devices_without_profile(response.devices_without_profile() + 1);
        continue;
      }
      const v1::ResolveWeightPathRequest asked = RequestFromRegistry(device);
      // What the server would accept from the device today.
      absl::StatusOr<policy::HardwareClass> hardware_class =
          ValidateAndClassifyResolveRequest(asked);
      absl::StatusOr<policy::Decision> before =
          hardware_class.ok() ? policy::Evaluate(current, *hardware_class, asked.profile(),
                                                 asked.priority(), asked.labels())
                              : absl::StatusOr<policy::Decision>(hardware_class.status());
      if (!before.ok()) {
        response.set_devices_without_profile(response.devices_without_profile() + 1);
        continue;
      }
      response.set_devices_evaluated(response.devices_evaluated() + 1);
      absl::StatusOr<policy::Decision> after = policy::Evaluate(
          **candidate, *hardware_class, asked.profile(), asked.priority(), asked.labels());
      const std::string& from = before->path->name;
      if (after.ok() && after->path->name == from) {
        response.set_devices_unchanged(response.devices_unchanged() + 1);
        continue;
      }
      MoveCount& count =
          moves[{std::string(policy::HardwareClassName(*hardware_class)), from,
                 after.ok() ? after->path->name : std::string(),
                 after.ok() ? std::string() : std::string(after.status().message())}];
      ++count.devices;
      if (count.examples.size() < examples) count.examples.push_back(device.device_id());
    }
    if (page.next_page_token.empty()) break;
    query.page_token = page.next_page_token;
  }

  std::vector<std::pair<MoveKey, MoveCount>> sorted(moves.begin(), moves.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.devices > b.second.devices;
  });
  for (auto& [key, count] : sorted) {
    v1::PlanPolicyResponse::Move* move = response.add_moves();
    move->set_hardware_class(std::get<0>(key));
    move->set_from_path(std::get<1>(key));
    move->set_to_path(std::get<2>(key));
    move->set_reason(std::get<3>(key));
    move->set_devices(count.devices);
    for (std::string& id : count.examples) move->add_example_device_ids(std::move(id));
  }
  *response.mutable_evaluated_at() = ToProtoTime(now);
  return response;
}

}  // namespace weightpath::server
