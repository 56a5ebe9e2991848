// Running vs assigned: whether a device runs another build than the one the
// server assigned it, why (a reason from a fixed set: it is a metric label),
// and since when. Pure: the store hands it the columns it keeps.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::store {

// Every value DriftOf can give, for metrics that must list their labels.
inline constexpr std::array<std::string_view, 6> kDriftReasons = {
    "pending", "rolled_back", "build_refused", "cache_full", "not_running", "fallback"};

// What the registry keeps of a device's last running report (device_running).
struct RunningRecord {
  std::string build_key;  // BuildKey of what runs; "" when nothing runs
  v1::Outcome outcome = v1::OUTCOME_UNSPECIFIED;  // the report that said so
  v1::BootSource source = v1::BOOT_SOURCE_UNSPECIFIED;
  absl::Time received_at;  // the server's clock
  absl::Time since;        // first report of this build_key
};

struct DriftVerdict {
  std::string_view reason;  // one of kDriftReasons
  absl::Time since;
};

// nullopt when the device runs what it is assigned, or cannot be judged:
// nothing assigned (assigned_key ""), or no running report.
std::optional<DriftVerdict> DriftOf(std::string_view assigned_key, absl::Time assigned_since,
                                    const std::optional<RunningRecord>& running);

}  // namespace weightpath::store
