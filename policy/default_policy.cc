#include <cstdlib>
#include <iostream>

#include "policy/policy.h"

namespace weightpath::policy {

// Defined in the file CMake generates from default_policy.yaml.
std::string_view EmbeddedDefaultPolicyYaml();

std::string_view DefaultPolicyYaml() { return EmbeddedDefaultPolicyYaml(); }

std::shared_ptr<const Policy> DefaultPolicy() {
  static const std::shared_ptr<const Policy> policy = [] {
    absl::StatusOr<std::shared_ptr<const Policy>> loaded =
        LoadPolicy(DefaultPolicyYaml(), "default_policy.yaml");
    if (!loaded.ok()) {
      // The bundled document is part of the build and covered by tests; a
      // binary carrying a broken one must not decide anything.
      std::cerr << "weightpath: the bundled default policy is invalid: " << loaded.status()
                << std::endl;
      std::abort();
    }
    return *std::move(loaded);
  }();
  return policy;
}

}  // namespace weightpath::policy
