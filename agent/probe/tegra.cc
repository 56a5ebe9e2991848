#include "agent/probe/tegra.h"

#include "absl/strings/string_view.h"

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace weightpath::probe {

std::optional<TegraSoc> DetectTegra(const Filesystem& filesystem) {
  std::optional<TegraSoc> found;
  constexpr absl::string_view kCompatible = "/proc/device-tree/compatible";
  if (auto compatible = filesystem.ReadFile(kCompatible); compatible.ok()) {
    for (absl::string_view entry : absl::StrSplit(*compatible, '\0', absl::SkipEmpty())) {
      absl::string_view model = entry;
      absl::ConsumePrefix(&model, "nvidia,");
      if (absl::StartsWith(model, "tegra")) {
        // The first tegra entry is the most specific (tegra234 before tegra23x).
        found = TegraSoc{std::string(model), std::string(kCompatible)};
        break;
      }
    }
  }
  constexpr absl::string_view kRelease = "/etc/nv_tegra_release";
  if (!found && filesystem.Exists(kRelease)) found = TegraSoc{"", std::string(kRelease)};
  return found;
}

}  // namespace weightpath::probe
