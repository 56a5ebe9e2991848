// The container args templates/deployment.yaml would give for a set of
// values, without helm: the args list is plain items inside if / else if /
// else / end blocks, which is the little of Go templates evaluated here.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::helm_test {

// INVALID_ARGUMENT naming the line when the args block uses a construct this
// reader does not know (so the test fails instead of guessing).
absl::StatusOr<std::vector<std::string>> RenderContainerArgs(const std::string& deployment_text,
                                                              const YAML::Node& values);

}  // namespace weightpath::helm_test
