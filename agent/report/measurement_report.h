// What `weightpath-agent report` sends: the JSON file an engine benchmark
// wrote, read as a ReportMeasurementRequest (protobuf JSON mapping, e.g.
// {"model": "...", "path": "w4a8-amx", "decode_tok_s": 86.1, "threads": 24,
//  "fidelity_exact_matches": 19, "fidelity_prompts": 20}).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

// Parses `json` (unknown fields are an error, so a misspelt figure is not
// silently dropped). Fills what the file may leave out:
//  * device_id from `device_id` (the agent config's) when absent; a file
//    naming another device is INVALID_ARGUMENT naming device_id;
//  * idempotency_key as "sha256:<hex of sha256(device_id NUL file bytes)>"
//    when absent, so the same device sending the same file again (a retry
//    after a lost answer, or a rerun of the command) is recognised by the
//    server and not counted twice.
// INVALID_ARGUMENT names `source_name` and the problem.
absl::StatusOr<v1::ReportMeasurementRequest> ParseMeasurementReport(
    absl::string_view json, absl::string_view source_name, absl::string_view device_id);

}  // namespace weightpath::agent
