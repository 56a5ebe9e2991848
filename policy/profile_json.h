// Text -> request data: a hardware profile in the seed prober's JSON, a
// priority name, and a label list. Shared by weightpathctl, the agent and the
// server's admin paths, so every entry point reports bad input the same way.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "policy/compiled_rules.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::policy {

// Accepts the seed prober's JSON as it is: unknown keys are ignored, and a
// JSON null leaves the field unset. Wrong types, negative counts and
// malformed JSON are INVALID_ARGUMENT naming `source_name` and the field.
absl::StatusOr<v1::HardwareProfile> ParseProfileJson(std::string_view json,
                                                     std::string_view source_name);

// "speed" or "fidelity", any case. INVALID_ARGUMENT names the value and the
// allowed ones.
absl::StatusOr<v1::Priority> ParsePriority(std::string_view text);

// "k=v,k2=v2" (spaces around items are trimmed; empty text is no labels).
// INVALID_ARGUMENT for an item without '=', an empty key or value, or a key
// given twice.
absl::StatusOr<Labels> ParseLabels(std::string_view text);

}  // namespace weightpath::policy
