// The decision the agent hands to the engine, and its JSON form: the
// ResolveWeightPathResponse in protobuf JSON (proto field names) plus
// `artifact_path` and `decision_source` at the top level.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent {

enum class DecisionSource {
  kServer,    // resolved by weightpath-server on this boot
  kLastGood,  // the last server decision whose artifact still verifies
  kOffline,   // evaluated on the device with the embedded default policy
};

// "server" | "last_good" | "offline"
absl::string_view DecisionSourceName(DecisionSource source);

// The bytes staging this decision's build downloaded, by where they came
// from: the configured artifact_mirrors (site caches) or the catalog's URIs
// (the origin). Zero for a build already cached; never saved with the
// decision, since the report that carries them is sent once.
struct DownloadedBytes {
  uint64_t from_mirrors = 0;
  uint64_t from_origin = 0;
};

struct DecisionRecord {
  v1::ResolveWeightPathResponse response;
  std::string artifact_path;  // empty when no verified artifact is available
  DecisionSource source = DecisionSource::kServer;
  DownloadedBytes downloaded = {};
};

absl::StatusOr<std::string> DecisionToJson(const DecisionRecord& record);

// INVALID_ARGUMENT naming `source_name` and the field when the text is not
// a decision this agent wrote.
absl::StatusOr<DecisionRecord> DecisionFromJson(absl::string_view json,
                                                absl::string_view source_name);

// DecisionFromJson of the file at `path`, which must also pass
// ValidateForEngine (engine_input.h). NOT_FOUND naming it when there is no
// such file; PERMISSION_DENIED / UNAVAILABLE when it cannot be read;
// INVALID_ARGUMENT when it is not a regular file of at most 4 MiB, not a
// decision, or one that cannot be handed to the engine.
absl::StatusOr<DecisionRecord> ReadDecisionFile(const std::string& path);

}  // namespace weightpath::agent
