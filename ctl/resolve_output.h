// Printing a ResolveWeightPathResponse for people (text) or programs (the
// protobuf JSON mapping with proto field names and defaults printed). Shared
// by the offline and the server-backed resolve.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "ctl/view_output.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::ctl {

// "speed", "fidelity" or "unspecified".
std::string PriorityWord(v1::Priority priority);

// What a decision's artifact is, in one line: its uri for one file; for a
// directory build "directory build: N files, B bytes (manifest sha256 S)".
// "-" when there is none.
std::string ArtifactSummary(const v1::Artifact& artifact);

absl::Status WriteResolveResponse(const v1::ResolveWeightPathResponse& response,
                                  ViewOutput format, std::ostream& out);

}  // namespace weightpath::ctl
