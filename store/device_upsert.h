// The registry's write path: one write-behind batch of device records into
// device_sightings (every device) and devices (only records that changed).
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "store/encoded_device.h"
#include "store/sql_database.h"

namespace weightpath::store {

// Validates the batch (device_id and last_seen on every record), then writes
// it in one transaction on `session`. A device listed twice keeps its newest
// record; a record older than what the store holds changes nothing.
absl::Status UpsertDeviceBatch(SqlSession& session, SqlDialect dialect,
                               const std::vector<EncodedDevice>& batch);

}  // namespace weightpath::store
