#include "server/rollout/rollout_fleet.h"

#include "common/proto_time.h"
#include "policy/hardware_class.h"

namespace weightpath::server {

deploy::DeviceOutcomes ToDeployOutcomes(const store::DeviceOutcomes& stored) {
  deploy::DeviceOutcomes outcomes;
  outcomes.device_id = stored.device_id;
  outcomes.rollout_id = stored.rollout_id;
  outcomes.lifecycle = stored.latest_outcome;
  outcomes.lifecycle_at = stored.latest_observed_at;
  outcomes.tasks_completed = stored.tasks_completed;
  outcomes.tasks_undone = stored.tasks_undone;
  outcomes.tasks_failed = stored.tasks_failed;
  return outcomes;
}

absl::StatusOr<FleetSnapshot> LoadFleetSnapshot(store::FleetStore& store) {
  FleetSnapshot snapshot;
  store::DeviceQuery query;
  query.page_size = store::kMaxPageSize;
  while (true) {
    absl::StatusOr<store::DevicePage> page = store.ListDevices(query);
    if (!page.ok()) return page.status();
    for (const v1::Device& device : page->devices) {
      absl::StatusOr<policy::HardwareClass> hardware_class =
          policy::ParseHardwareClass(device.hardware_class());
      if (!hardware_class.ok()) continue;
      deploy::FleetDevice entry;
      entry.device_id = device.device_id();
      entry.labels = device.labels();
      entry.hardware_class = *hardware_class;
      snapshot.devices.push_back(std::move(entry));
      FleetSnapshot::Sighting sighting{device.rollout_id()};
      if (device.has_rollout_since()) sighting.since = FromProtoTime(device.rollout_since());
      if (device.has_last_seen()) sighting.last_seen = FromProtoTime(device.last_seen());
      snapshot.sightings.push_back(std::move(sighting));
    }
    if (page->next_page_token.empty()) break;
    query.page_token = page->next_page_token;
  }
  absl::StatusOr<std::vector<store::DeviceOutcomes>> outcomes = store.LatestOutcomes("");
  if (!outcomes.ok()) return outcomes.status();
  for (const store::DeviceOutcomes& stored : *outcomes) {
    snapshot.records[stored.device_id].push_back(ToDeployOutcomes(stored));
  }
  return snapshot;
}

std::vector<deploy::FleetDevice> FleetFor(const FleetSnapshot& snapshot,
                                          const std::string& rollout_id) {
  static const std::vector<deploy::DeviceOutcomes> kNone;
  std::vector<deploy::FleetDevice> fleet = snapshot.devices;
  for (size_t i = 0; i < fleet.size(); ++i) {
    deploy::FleetDevice& device = fleet[i];
    auto found = snapshot.records.find(device.device_id);
    deploy::AssignOutcomeRecords(found == snapshot.records.end() ? kNone : found->second,
                                 rollout_id, &device);
    const FleetSnapshot::Sighting& sighting = snapshot.sightings[i];
    device.first_shaped_resolve =
        sighting.rollout_id == rollout_id ? sighting.since : absl::InfiniteFuture();
  }
  return fleet;
}

}  // namespace weightpath::server
