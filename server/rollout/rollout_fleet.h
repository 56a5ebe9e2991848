// The fleet as the rollout logic sees it, read from the store: each
// registered device's labels and hardware class with its outcome records.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deploy/cohort_outcomes.h"
#include "store/store.h"

namespace weightpath::server {

struct FleetSnapshot {
  std::vector<deploy::FleetDevice> devices;  // on_*_build left empty
  // By device, as devices: the rollout its last resolve carried, when it
  // was first given it (InfinitePast: not known, for a row stored before
  // the store kept it), and its last resolve.
  struct Sighting {
    std::string rollout_id;
    absl::Time since = absl::InfinitePast();
    absl::Time last_seen = absl::InfinitePast();
  };
  std::vector<Sighting> sightings;
  // Every outcome record, by device id, in deploy's form.
  std::map<std::string, std::vector<deploy::DeviceOutcomes>> records;
};

// All devices (every page) and all outcome records, one read each. A device
// whose stored hardware class is unknown to this binary is left out, since
// no selector could judge it. UNAVAILABLE when the store is.
absl::StatusOr<FleetSnapshot> LoadFleetSnapshot(store::FleetStore& store);

// The snapshot's devices with their records assigned for `rollout_id`, and
// first_shaped_resolve: when its last resolve carried this rollout, the
// first resolve that did; otherwise InfiniteFuture (not told yet).
std::vector<deploy::FleetDevice> FleetFor(const FleetSnapshot& snapshot,
                                          const std::string& rollout_id);

deploy::DeviceOutcomes ToDeployOutcomes(const store::DeviceOutcomes& stored);

}  // namespace weightpath::server
