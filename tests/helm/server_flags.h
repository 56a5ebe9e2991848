// What the real weightpath-server says about its own flags, read from its
// --helpfull output so the chart is checked against the binary, not a list.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace weightpath::helm_test {

// Flag name -> default value as printed (without quotes).
// INTERNAL when the binary cannot be run or prints no flags.
absl::StatusOr<std::map<std::string, std::string>> ServerFlagDefaults(const std::string& binary);

}  // namespace weightpath::helm_test
