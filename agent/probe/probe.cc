#include "agent/probe/probe.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/probe_steps.h"

namespace weightpath::probe {

absl::StatusOr<v1::HardwareProfile> ProbeHardware(const ProbeEnvironment& environment) {
  // The project's own variable wins over the seed's when both are set.
  for (const char* variable : {kProfileFileVariable, kSeedProfileFileVariable}) {
    auto it = environment.environment_variables.find(variable);
    if (it != environment.environment_variables.end() && !it->second.empty()) {
      return LoadProfileFile(variable, it->second);
    }
  }
  if (environment.filesystem == nullptr) {
    return absl::InvalidArgumentError("ProbeEnvironment.filesystem is not set");
  }
  if (!environment.filesystem->Exists("/")) {
    return absl::NotFoundError(
        absl::StrCat("root: ", environment.filesystem->root(), " does not exist"));
  }

  v1::HardwareProfile profile;
  profile.set_source("probe");
  ProbeCpu(environment, &profile);
  ProbeMemory(*environment.filesystem, &profile);
  ProbeSystem(*environment.filesystem, &profile);
  ApplyResourceLimits(environment, &profile);
  ProbeAccelerators(environment, &profile);
  return profile;
}

}  // namespace weightpath::probe
