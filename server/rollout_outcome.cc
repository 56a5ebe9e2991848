#include "server/rollout_outcome.h"

#include "absl/strings/str_cat.h"
#include "deploy/label_selector.h"
#include "deploy/rollout_shaping.h"
#include "policy/hardware_class.h"
#include "store/measurement_validation.h"

namespace weightpath::server {
namespace {

// A report without a rollout is about the build a device runs outside any
// rollout: for each live rollout that selects the device but has not taken
// it in, that is control-group evidence.
void CountControl(const v1::ReportOutcomeRequest& request, const OutcomeContext& context) {
  absl::StatusOr<v1::Device> device = context.store->GetDevice(request.device_id());
  if (!device.ok()) return;
  absl::StatusOr<policy::HardwareClass> hardware_class =
      policy::ParseHardwareClass(device->hardware_class());
  if (!hardware_class.ok()) return;
  for (const v1::Rollout& rollout : *context.cache->Current()) {
    if (rollout.state() != v1::ROLLOUT_STATE_PROGRESSING &&
        rollout.state() != v1::ROLLOUT_STATE_PAUSED) {
      continue;
    }
    if (!deploy::Matches(rollout.selector(), device->labels(), *hardware_class)) continue;
    if (deploy::IsMember(rollout, request.device_id(), device->labels(), *hardware_class)) continue;
    context.metrics->CountOutcome(rollout.id(), "control", request.outcome());
  }
}

}  // namespace

absl::StatusOr<v1::ReportOutcomeResponse> HandleReportOutcome(const v1::ReportOutcomeRequest& request,
                                                              const OutcomeContext& context) {
  if (absl::Status valid = store::ValidateOutcome(request); !valid.ok()) return valid;
  if (context.authenticated_device_id.has_value() &&
      *context.authenticated_device_id != request.device_id()) {
    return absl::PermissionDeniedError(
        absl::StrCat("device_id: '", request.device_id(), "' is not the id in the client certificate ('",
                     *context.authenticated_device_id, "'); a device reports only for itself"));
  }
  absl::StatusOr<bool> duplicate = context.store->RecordOutcome(request, context.received_at);
  if (!duplicate.ok()) return duplicate.status();
  if (!*duplicate && context.metrics != nullptr) {
    if (!request.rollout_id().empty()) {
      context.metrics->CountOutcome(request.rollout_id(), "member", request.outcome());
    } else {
      CountControl(request, context);
    }
  }
  v1::ReportOutcomeResponse response;
  response.set_duplicate(*duplicate);
  return response;
}

}  // namespace weightpath::server
