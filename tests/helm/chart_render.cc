#include "tests/helm/chart_render.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/subprocess.h"

namespace weightpath::helm_test {

std::vector<YAML::Node> RenderedChart::OfKind(const std::string& kind) const {
  std::vector<YAML::Node> found;
  for (const RenderedManifest& manifest : manifests) {
    if (manifest.document["kind"].as<std::string>("") == kind) found.push_back(manifest.document);
  }
  return found;
}

const YAML::Node RenderedChart::Only(const std::string& kind) const {
  std::vector<YAML::Node> found = OfKind(kind);
  return found.size() == 1 ? found.front() : YAML::Node(YAML::NodeType::Undefined);
}

namespace {

// helm_render prints each document as "---\n# Source: FILE\n<text>\n".
absl::StatusOr<std::vector<RenderedManifest>> ParseManifests(const std::string& out) {
  std::vector<RenderedManifest> manifests;
  constexpr absl::string_view kSourceLine = "# Source: ";
  const std::vector<std::string> lines = absl::StrSplit(out, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] == "---" && i + 1 < lines.size() && absl::StartsWith(lines[i + 1], kSourceLine)) {
      manifests.push_back({std::string(absl::StripPrefix(lines[i + 1], kSourceLine)), "", {}});
      ++i;
      continue;
    }
    if (manifests.empty()) {
      if (lines[i].empty()) continue;
      return absl::InternalError(absl::StrCat("helm_render printed text before any manifest: ", out));
    }
    absl::StrAppend(&manifests.back().text, lines[i], "\n");
  }
  for (RenderedManifest& manifest : manifests) {
    try {
      manifest.document = YAML::Load(manifest.text);
    } catch (const YAML::Exception& error) {
      return absl::InternalError(
          absl::StrCat(manifest.source, " does not parse as YAML: ", error.what(), "\n", manifest.text));
    }
  }
  return manifests;
}

}  // namespace

absl::StatusOr<RenderedChart> RenderChart(const std::vector<std::string>& args) {
  const std::string renderer = WEIGHTPATH_HELM_RENDER;
  if (renderer.empty()) {
    return absl::FailedPreconditionError(
        "helm_render was not built: no go at configure time; scripts/install-deps installs "
        "golang-go and the Go packages, then re-run cmake");
  }
  std::vector<std::string> command = {renderer, "--chart",
                                      std::string(WEIGHTPATH_SOURCE_DIR) + "/helm/weightpath",
                                      "--release-name", "wp", "--namespace", "fleet"};
  command.insert(command.end(), args.begin(), args.end());
  const weightpath::testing::ProcessResult manifests = weightpath::testing::RunProcess(command);
  RenderedChart chart;
  if (manifests.exit_code == 1) {
    chart.error = std::string(absl::StripSuffix(absl::StripPrefix(manifests.err, "Error: "), "\n"));
    return chart;
  }
  if (manifests.exit_code != 0) {
    return absl::InternalError(absl::StrCat("helm_render exited ", manifests.exit_code, ": ",
                                            manifests.err));
  }
  absl::StatusOr<std::vector<RenderedManifest>> parsed = ParseManifests(manifests.out);
  if (!parsed.ok()) return parsed.status();
  chart.manifests = std::move(*parsed);

  command.push_back("--notes");
  const weightpath::testing::ProcessResult notes = weightpath::testing::RunProcess(command);
  if (notes.exit_code != 0) {
    return absl::InternalError(absl::StrCat("helm_render --notes exited ", notes.exit_code, ": ",
                                            notes.err));
  }
  chart.notes = notes.out;
  chart.ok = true;
  return chart;
}

}  // namespace weightpath::helm_test
