#include "agent/probe/tegra.h"

#include "absl/strings/string_view.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

std::optional<L4tRelease> ParseL4tRelease(absl::string_view release_file) {
  absl::string_view line = release_file.substr(0, release_file.find('\n'));
  if (!absl::ConsumePrefix(&line, "# R")) return std::nullopt;
  size_t digits = 0;
  while (digits < line.size() && digits < 4 && absl::ascii_isdigit(static_cast<unsigned char>(line[digits]))) {
    ++digits;
  }
  L4tRelease release;
  if (digits == 0 || !absl::SimpleAtoi(line.substr(0, digits), &release.major)) return std::nullopt;
  release.text = std::string(line.substr(0, digits));
  const size_t revision = line.find("REVISION: ");
  if (revision != absl::string_view::npos) {
    absl::string_view rest = line.substr(revision + 10);
    size_t end = 0;
    while (end < rest.size() && end < 16 &&
           (absl::ascii_isdigit(static_cast<unsigned char>(rest[end])) || rest[end] == '.')) {
      ++end;
    }
    if (end > 0) absl::StrAppend(&release.text, ".", rest.substr(0, end));
  }
  return release;
}

}  // namespace weightpath::probe
