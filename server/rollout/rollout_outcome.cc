#include "server/rollout/rollout_outcome.h"

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

// A rollout id becomes a metric label and a row the gates read, so only
// one an operator created is taken. The cache answers for every rollout it
// has seen; one created on another replica since its last refresh is looked
// up in the store.
absl::Status RequireKnownRollout(const std::string& rollout_id, const OutcomeContext& context) {
  if (context.cache != nullptr) {
    for (const v1::Rollout& rollout : *context.cache->Current()) {
      if (rollout.id() == rollout_id) return absl::OkStatus();
    }
  }
  absl::StatusOr<store::StoredRollout> stored = context.store->GetRollout(rollout_id);
  if (stored.ok()) return absl::OkStatus();
  if (stored.status().code() != absl::StatusCode::kNotFound) return stored.status();
  return absl::NotFoundError(absl::StrCat("rollout_id \"", rollout_id,
                                          "\" names no rollout; report the rollout_id the "
                                          "decision carried, or none"));
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
  if (!request.rollout_id().empty()) {
    if (absl::Status known = RequireKnownRollout(request.rollout_id(), context); !known.ok()) {
      return known;
    }
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
